//! Fuzz bodies for the cluster metadata decoders (skiff-cluster): values read back from the
//! metadata store, which any process with etcd access can write.
//!
//! `cluster_records`: the first byte picks a key of the layout, the rest is its value. The value
//! goes through the record decoder (a record that decodes re-encodes and decodes to itself) and,
//! as a watch event of that key, into a cluster image, which must either hold it or list the key
//! as undecodable, never panic; a controller plan over that image must stay within etcd's Txn
//! limits.

use skiff_cluster::controller::{plan, PlanLimits};
use skiff_cluster::records::{
    decode, encode, BrokerRegistration, BundleRecord, ClusterRecord, ControllerRecord, LoadRecord,
    PartitionState, ProducerIdBlockRecord, ReassignRecord, TopicRecord,
};
use skiff_cluster::{ClusterImage, Key, Layout};
use skiff_meta::{Event, EventKind, KeyValue, WatchBatch};

/// Targets of this module.
pub const TARGETS: &[crate::Target] = &[("cluster_records", cluster_records)];

fn round_trips<T>(key: &Key, value: &[u8])
where
    T: serde::Serialize + serde::de::DeserializeOwned + PartialEq + std::fmt::Debug,
{
    if let Ok(record) = decode::<T>(key, value) {
        let again: T = decode(key, &encode(&record)).expect("a re-encoded record decodes");
        assert_eq!(again, record, "re-encoding keeps the record");
    }
}

pub fn cluster_records(data: &[u8]) {
    let Some((&selector, value)) = data.split_first() else {
        return;
    };
    let key = match selector % 9 {
        0 => Key::Cluster,
        1 => Key::Broker(i32::from(selector)),
        2 => Key::Controller,
        3 => Key::Topic("t".into()),
        4 => Key::Partition("t".into(), i32::from(selector >> 3)),
        5 => Key::Load(1),
        6 => Key::Bundle(skiff_placement::BundleId {
            namespace: "t".into(),
            range: skiff_placement::HashRange {
                lo: 0,
                hi: skiff_placement::bundle::HASH_SPACE,
            },
        }),
        7 => Key::Reassign("t".into(), i32::from(selector >> 3)),
        _ => Key::ProducerIdBlock,
    };
    match &key {
        Key::Cluster => round_trips::<ClusterRecord>(&key, value),
        Key::Broker(_) => round_trips::<BrokerRegistration>(&key, value),
        Key::Controller => round_trips::<ControllerRecord>(&key, value),
        Key::Topic(_) => round_trips::<TopicRecord>(&key, value),
        Key::Partition(..) => round_trips::<PartitionState>(&key, value),
        Key::Load(_) => round_trips::<LoadRecord>(&key, value),
        Key::ProducerIdBlock => round_trips::<ProducerIdBlockRecord>(&key, value),
        Key::Bundle(_) => round_trips::<BundleRecord>(&key, value),
        Key::Reassign(..) => round_trips::<ReassignRecord>(&key, value),
    }
    let layout = Layout::new("fuzz").expect("a valid name");
    let mut image = ClusterImage::new(layout.clone());
    let put = |key: &Key, value: &[u8], revision: i64| WatchBatch {
        revision,
        events: vec![Event {
            kind: EventKind::Put,
            kv: KeyValue {
                key: layout.key(key).into_bytes(),
                value: value.to_vec(),
                create_revision: revision,
                mod_revision: revision,
                version: 1,
                lease: 0,
            },
            prev_kv: None,
        }],
    };
    // The same bytes as a topic record and as its partition's state, then as the fuzzed key.
    image.apply(&put(&Key::Topic("t".into()), value, 2));
    image.apply(&put(&Key::Partition("t".into(), 0), value, 3));
    image.apply(&put(&key, value, 4));
    assert_eq!(image.revision(), 4);
    let undecodable = image.undecodable().contains_key(&key);
    let held = match &key {
        Key::Cluster => image.cluster().is_some(),
        Key::Broker(id) => image.is_live(*id),
        Key::Controller => image.controller().is_some(),
        Key::Topic(topic) => image.topics().contains_key(topic),
        Key::Partition(topic, partition) => image.partition(topic, *partition).is_some(),
        Key::Load(id) => image.loads().contains_key(id),
        Key::ProducerIdBlock => image.producer_id_block().is_some(),
        Key::Bundle(bundle) => image.bundles().contains_key(bundle),
        Key::Reassign(topic, partition) => image.reassignment(topic, *partition).is_some(),
    };
    assert!(
        held != undecodable,
        "a key is either held or reported undecodable"
    );
    for write in plan(&image, 1, PlanLimits::default()) {
        let largest = write
            .txn
            .compares
            .len()
            .max(write.txn.success.len())
            .max(write.txn.failure.len());
        assert!(
            largest <= skiff_meta::limits::TXN_OPS_MAX,
            "a plan exceeds etcd's Txn limit"
        );
    }
}
