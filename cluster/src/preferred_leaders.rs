//! Who leads each new partition (docs/design/cluster.md §5.2): the owner of the bundle it hashes
//! into, so a bundle's partitions share one preferred leader and the shedder can move the bundle as
//! one unit. Topic creation and CreatePartitions ask this, then placement
//! (`skiff_placement::assign_replicas`) draws the other replicas around it.
//!
//! Per new partition: if a bundle record of the image covers it and its owner is running, that
//! owner; otherwise a new owner, which placement draws by weight once per bundle and shares
//! among the bundle's new partitions. A new namespace has no records yet, so its bundles are
//! those of the default layout ([`crate::bundles::default_layout`]), the layout the controller
//! then writes its records in, each owned by its partitions' preferred leader
//! ([`crate::bundles`]).
//!
//! Must never: read the clock or a store (the image is an argument), or choose a node itself
//! (placement draws the new owners).

use std::collections::{BTreeMap, BTreeSet};

use skiff_placement::{BundleId, BundleMap, NodeId, PreferredLeader};

use crate::bundles::{bundle_of, default_layout};
use crate::image::ClusterImage;

/// The preferred leader of partitions `first..first + count` of `topic`, by the rule of the
/// module doc. `running`: the brokers placement may choose from (its view), so every
/// [`PreferredLeader::Owner`] is one of them.
pub fn preferred_leaders(
    image: &ClusterImage,
    topic: &str,
    first: i32,
    count: usize,
    running: &BTreeSet<NodeId>,
) -> Vec<PreferredLeader> {
    // Created on first use: only partitions without a record need the default layout.
    let mut layout: Option<BundleMap> = None;
    // Each bundle needing a new owner, numbered as first met.
    let mut new_bundles: BTreeMap<BundleId, usize> = BTreeMap::new();
    (0..count)
        .map(|offset| {
            // Indices past i32::MAX cannot exist (the caller bounds the count); saturating keeps
            // the answer one entry per partition regardless.
            let partition = first.saturating_add(i32::try_from(offset).unwrap_or(i32::MAX));
            let recorded = bundle_of(image, topic, partition).and_then(|bundle| {
                let owner = image.bundles().get(&bundle)?.value.owner;
                Some((bundle, owner))
            });
            let bundle = match recorded {
                Some((_, owner)) if running.contains(&owner) => {
                    return PreferredLeader::Owner(owner)
                }
                Some((bundle, _)) => bundle,
                None => default_bundle(&mut layout, topic, partition),
            };
            let next = new_bundles.len();
            PreferredLeader::NewOwner(*new_bundles.entry(bundle).or_insert(next))
        })
        .collect()
}

/// The bundle of the default layout that `partition` of `topic` hashes into.
fn default_bundle(layout: &mut Option<BundleMap>, topic: &str, partition: i32) -> BundleId {
    let layout = layout.get_or_insert_with(default_layout);
    // Partition indices are never negative (the caller counts up from an existing count).
    layout.locate(topic, u32::try_from(partition).unwrap_or(0))
}

#[cfg(test)]
mod tests {
    use skiff_meta::{Txn, TxnOp};
    use skiff_placement::bundle::partition_hash;
    use skiff_placement::HashRange;

    use super::*;
    use crate::layout::Key;
    use crate::records::{encode, BundleRecord, BundleState};
    use crate::test_world::World;

    fn put_bundle(world: &mut World, namespace: &str, range: HashRange, owner: NodeId) {
        let key = world.layout.key(&Key::Bundle(BundleId {
            namespace: namespace.to_owned(),
            range,
        }));
        let record = BundleRecord {
            owner,
            state: BundleState::Owned,
            target: None,
            since_ms: 0,
            reason: "created".to_owned(),
            moves: Vec::new(),
        };
        let put = Txn::new().and_then(vec![TxnOp::put(key, encode(&record))]);
        assert!(world.core.txn(&put).unwrap().succeeded);
    }

    const LOW: HashRange = HashRange { lo: 0, hi: 1 << 31 };
    const HIGH: HashRange = HashRange {
        lo: 1 << 31,
        hi: 1 << 32,
    };

    #[test]
    fn a_recorded_running_owner_leads_and_a_dead_ones_bundle_gets_one_new_owner() {
        let mut world = World::new(&[1, 2, 3]);
        // "orders" in two halves: broker 2 owns the low one, broker 9 (not running) the high
        // one. The namespaces sorting next to it ("order", "orders2") are not consulted.
        put_bundle(&mut world, "orders", LOW, 2);
        put_bundle(&mut world, "orders", HIGH, 9);
        for neighbour in ["order", "orders2"] {
            put_bundle(&mut world, neighbour, LOW, 3);
            put_bundle(&mut world, neighbour, HIGH, 3);
        }
        let running = BTreeSet::from([1, 2, 3]);
        let leaders = preferred_leaders(&world.image(), "orders", 0, 16, &running);
        for (partition, leader) in (0u32..).zip(&leaders) {
            let expected = if LOW.contains(partition_hash("orders", partition)) {
                PreferredLeader::Owner(2)
            } else {
                // Every high-half partition shares the one new owner key.
                PreferredLeader::NewOwner(0)
            };
            assert_eq!(*leader, expected, "partition {partition}");
        }
        assert!(leaders.contains(&PreferredLeader::Owner(2)));
        assert!(leaders.contains(&PreferredLeader::NewOwner(0)));
    }

    #[test]
    fn a_new_namespace_gets_one_new_owner_key_per_default_bundle() {
        let mut world = World::new(&[1]);
        // Another namespace's records do not make "fresh" recorded.
        put_bundle(&mut world, "fresh2", LOW, 1);
        put_bundle(&mut world, "fresh2", HIGH, 1);
        let leaders = preferred_leaders(&world.image(), "fresh", 0, 12, &BTreeSet::from([1]));
        let mut layout = default_layout();
        let mut keys: BTreeMap<usize, BundleId> = BTreeMap::new();
        for (partition, leader) in (0u32..).zip(&leaders) {
            let PreferredLeader::NewOwner(key) = leader else {
                panic!("partition {partition}: {leader:?}");
            };
            let bundle = layout.locate("fresh", partition);
            // One bundle per key, and one key per bundle.
            assert_eq!(*keys.entry(*key).or_insert(bundle.clone()), bundle);
        }
        let distinct: BTreeSet<&BundleId> = keys.values().collect();
        assert_eq!(distinct.len(), keys.len());
        assert!(
            keys.len() > 1,
            "12 partitions hash into more than one of 4 bundles"
        );
    }
}
