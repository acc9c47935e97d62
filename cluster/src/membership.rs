//! The Txns a broker writes itself, and how it reads their answers (docs/design/cluster.md §2a,
//! §3): registering under its lease, entering controlled shutdown, campaigning for controller,
//! writing the cluster id once, and taking producer-id blocks. Topic changes are [`crate::topics`].
//!
//! Must never: submit anything (the broker's driver does) or read the clock.

use skiff_meta::{Compare, CompareOp, LeaseId, Txn, TxnOp, TxnOpResponse, TxnResponse};
use skiff_placement::NodeId;

use crate::image::Versioned;
use crate::layout::{Key, Layout};
use crate::records::{
    decode, encode, BrokerRegistration, ClusterRecord, ControllerRecord, ProducerIdBlockRecord,
    RecordError,
};

/// Producer ids taken per block (Kafka's `/latest_producer_id_block` took 1000 too).
pub const PRODUCER_ID_BLOCK_SIZE: i64 = 1000;

/// Why a registration or campaign answer could not be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MembershipError {
    /// Another data directory holds a live registration of this `node.id`.
    #[error(
        "node.id {node_id} is already registered by a live broker with another data directory \
         (its directory id {their_directory}, listeners {their_listeners}); this broker's data \
         directory has id {our_directory}. Give each broker its own node.id"
    )]
    DuplicateNodeId {
        /// The id.
        node_id: NodeId,
        /// The holder's directory id.
        their_directory: String,
        /// The holder's listeners, for the message.
        their_listeners: String,
        /// Ours.
        our_directory: String,
    },
    /// The store holds a record this layout cannot read.
    #[error(transparent)]
    Record(#[from] RecordError),
    /// The store answered a Txn without the read its failure branch asked for.
    #[error("the store's answer to {what} has no read of the current value")]
    MissingRead {
        /// Which Txn.
        what: &'static str,
    },
}

fn read_back<'a>(
    response: &'a TxnResponse,
    what: &'static str,
) -> Result<Option<&'a skiff_meta::KeyValue>, MembershipError> {
    match response.responses.first() {
        Some(TxnOpResponse::Get { kvs }) => Ok(kvs.first()),
        _ => Err(MembershipError::MissingRead { what }),
    }
}

/// `R/cluster` written if absent; the failure branch reads the existing one.
pub fn create_cluster(layout: &Layout, record: &ClusterRecord) -> Txn {
    let key = layout.key(&Key::Cluster);
    Txn::new()
        .when(vec![Compare::absent(key.clone())])
        .and_then(vec![TxnOp::put(key.clone(), encode(record))])
        .or_else(vec![TxnOp::get(key)])
}

/// The cluster record in force after [`create_cluster`]: ours, or the one already there.
pub fn cluster_outcome(
    ours: &ClusterRecord,
    response: &TxnResponse,
) -> Result<ClusterRecord, MembershipError> {
    if response.succeeded {
        return Ok(ours.clone());
    }
    match read_back(response, "the cluster record")? {
        Some(kv) => Ok(decode(&Key::Cluster, &kv.value)?),
        None => Err(MembershipError::MissingRead {
            what: "the cluster record",
        }),
    }
}

/// Registers this broker under its lease, if no registration of its id exists.
pub fn register(layout: &Layout, registration: &BrokerRegistration, lease: LeaseId) -> Txn {
    let key = layout.key(&Key::Broker(registration.node_id));
    Txn::new()
        .when(vec![Compare::absent(key.clone())])
        .and_then(vec![TxnOp::put_with_lease(
            key.clone(),
            encode(registration),
            lease,
        )])
        .or_else(vec![TxnOp::get(key)])
}

/// Begins this broker's controlled shutdown (docs/design/cluster.md §3): its registration, as
/// `registration` says (`shutting_down`), replaces the one it holds, if that is still the one of
/// its session (`broker_epoch`, on `lease`). The controller then moves its leaderships away.
pub fn begin_controlled_shutdown(
    layout: &Layout,
    registration: &BrokerRegistration,
    lease: LeaseId,
    broker_epoch: i64,
) -> Txn {
    let key = layout.key(&Key::Broker(registration.node_id));
    Txn::new()
        .when(vec![
            Compare::create_revision(key.clone(), CompareOp::Equal, broker_epoch),
            Compare::lease(key.clone(), CompareOp::Equal, lease),
        ])
        .and_then(vec![TxnOp::put_with_lease(
            key,
            encode(registration),
            lease,
        )])
}

/// What a [`register`] Txn came to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Registration {
    /// Registered; the broker epoch is the Txn's revision.
    Registered {
        /// `create_revision` of the registration.
        broker_epoch: i64,
    },
    /// A registration from this same data directory is still live (an earlier process that was
    /// killed): revoke that lease, or wait for it to expire, and register again.
    StaleOwnRegistration {
        /// The old registration's lease.
        lease: LeaseId,
    },
    /// The key vanished between the compare and the read: try again.
    Retry,
}

/// Reads the answer to [`register`].
pub fn registration_outcome(
    ours: &BrokerRegistration,
    response: &TxnResponse,
) -> Result<Registration, MembershipError> {
    if response.succeeded {
        return Ok(Registration::Registered {
            broker_epoch: response.revision,
        });
    }
    let Some(kv) = read_back(response, "the registration")? else {
        return Ok(Registration::Retry);
    };
    let theirs: BrokerRegistration = decode(&Key::Broker(ours.node_id), &kv.value)?;
    if theirs.directory_id == ours.directory_id {
        return Ok(Registration::StaleOwnRegistration { lease: kv.lease });
    }
    let listeners = theirs
        .listeners
        .iter()
        .map(|l| format!("{}://{}:{}", l.name, l.host, l.port))
        .collect::<Vec<_>>()
        .join(",");
    Err(MembershipError::DuplicateNodeId {
        node_id: ours.node_id,
        their_directory: theirs.directory_id,
        their_listeners: listeners,
        our_directory: ours.directory_id.clone(),
    })
}

/// Campaigns for controller: create `R/controller` on this broker's lease if absent.
pub fn campaign(layout: &Layout, node_id: NodeId, broker_epoch: i64, lease: LeaseId) -> Txn {
    let key = layout.key(&Key::Controller);
    let record = ControllerRecord {
        broker_id: node_id,
        broker_epoch,
    };
    Txn::new()
        .when(vec![Compare::absent(key.clone())])
        .and_then(vec![TxnOp::put_with_lease(
            key.clone(),
            encode(&record),
            lease,
        )])
        .or_else(vec![TxnOp::get(key)])
}

/// What a [`campaign`] came to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Campaign {
    /// This broker is the controller at this epoch (the key's `create_revision`).
    Won {
        /// The controller epoch.
        controller_epoch: i64,
    },
    /// Another broker (or this one, in an older session) holds the key: watch it and campaign
    /// again when it is deleted.
    Lost {
        /// The holder and its controller epoch, when the key still existed at the read.
        holder: Option<(NodeId, i64)>,
    },
}

/// Reads the answer to [`campaign`].
pub fn campaign_outcome(response: &TxnResponse) -> Result<Campaign, MembershipError> {
    if response.succeeded {
        return Ok(Campaign::Won {
            controller_epoch: response.revision,
        });
    }
    let holder = match read_back(response, "the controller key")? {
        Some(kv) => {
            let record: ControllerRecord = decode(&Key::Controller, &kv.value)?;
            Some((record.broker_id, kv.create_revision))
        }
        None => None,
    };
    Ok(Campaign::Lost { holder })
}

/// Takes the next producer-id block by compare-and-set on `R/ids/producer_id_block`, from the
/// key as last read (`None`: absent). The block starts at the key's next start, or at `at_least`
/// if that is higher (ids below it may be in use: a data directory's older reservations). Returns
/// the Txn and the block (first id, end exclusive); on a failed compare the caller reads the key
/// again and retries.
pub fn claim_producer_id_block(
    layout: &Layout,
    seen: Option<&Versioned<ProducerIdBlockRecord>>,
    at_least: i64,
) -> (Txn, (i64, i64)) {
    let key = layout.key(&Key::ProducerIdBlock);
    let (guard, next) = match seen {
        Some(block) => (
            Compare::mod_revision(key.clone(), CompareOp::Equal, block.mod_revision),
            block.value.next_block_start,
        ),
        None => (Compare::absent(key.clone()), 0),
    };
    let start = next.max(at_least).max(0);
    let end = start.saturating_add(PRODUCER_ID_BLOCK_SIZE);
    let record = ProducerIdBlockRecord {
        next_block_start: end,
    };
    (
        Txn::new()
            .when(vec![guard])
            .and_then(vec![TxnOp::put(key, encode(&record))]),
        (start, end),
    )
}

/// Reads `R/ids/producer_id_block` from a GET of that key.
pub fn producer_id_block_of(
    kv: Option<&skiff_meta::KeyValue>,
) -> Result<Option<Versioned<ProducerIdBlockRecord>>, MembershipError> {
    kv.map(|kv| {
        Ok(Versioned {
            value: decode(&Key::ProducerIdBlock, &kv.value)?,
            create_revision: kv.create_revision,
            mod_revision: kv.mod_revision,
            lease: kv.lease,
        })
    })
    .transpose()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::records::BrokerState;
    use skiff_meta::{GetRequest, MetaCore};

    #[test]
    fn controlled_shutdown_rewrites_only_the_registration_of_its_own_session() {
        let layout = Layout::new("t").unwrap();
        let mut core = MetaCore::new();
        let mut ours = BrokerRegistration {
            node_id: 1,
            directory_id: "d".into(),
            incarnation: "i".into(),
            rack: None,
            listeners: Vec::new(),
            state: BrokerState::Running,
        };
        let lease = core.lease_grant(10, 0).unwrap().id;
        let response = core.txn(&register(&layout, &ours, lease)).unwrap();
        let Registration::Registered { broker_epoch } =
            registration_outcome(&ours, &response).unwrap()
        else {
            panic!("not registered");
        };
        ours.state = BrokerState::ShuttingDown;
        let stale = begin_controlled_shutdown(&layout, &ours, lease, broker_epoch - 1);
        assert!(!core.txn(&stale).unwrap().succeeded);
        let other_lease = core.lease_grant(10, 0).unwrap().id;
        let foreign = begin_controlled_shutdown(&layout, &ours, other_lease, broker_epoch);
        assert!(!core.txn(&foreign).unwrap().succeeded);
        let txn = begin_controlled_shutdown(&layout, &ours, lease, broker_epoch);
        assert!(core.txn(&txn).unwrap().succeeded);
        let kv = core
            .get(&GetRequest::key(layout.key(&Key::Broker(1))))
            .unwrap()
            .kvs
            .remove(0);
        let stored: BrokerRegistration = decode(&"b", &kv.value).unwrap();
        assert_eq!(stored.state, BrokerState::ShuttingDown);
        // Still on the session's lease, with the same broker epoch.
        assert_eq!((kv.lease, kv.create_revision), (lease, broker_epoch));
        core.lease_revoke(lease).unwrap();
        assert!(!core.txn(&txn).unwrap().succeeded, "gone with its lease");
    }
}
