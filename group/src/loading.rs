//! Which groups this coordinator holds: the `__consumer_offsets` partitions it leads, each loaded
//! from its own offsets log when its leadership arrives and unloaded when it goes (Kafka's
//! `onElection` / `onResignation` of the group coordinator).
//!
//! A group belongs to partition `coordinator_partition(group, N)` of `__consumer_offsets`, so its
//! commits go to that partition's log and only that partition's leader answers for it. While a
//! led partition is not loaded yet, its groups get COORDINATOR_LOAD_IN_PROGRESS; groups of a
//! partition led elsewhere get NOT_COORDINATOR, and clients find the coordinator again.
//!
//! Must never: serve a group whose partition is not loaded, keep a group after its partition's
//! leadership went (its parked requests are answered NOT_COORDINATOR), or load entries of a group
//! that belongs to another partition (a single-node offsets log held every group in partition 0).

use std::collections::BTreeSet;

use super::coordinated::{coordinator_partition, Coordinated};
use skiff_protocol::error_code::ErrorCode;

use super::coordinator::{Coordinator, Response};
use super::offsets_log::{OffsetLogEntry, Replayed};

/// The offsets partition every group uses while no [`Coordinated`] was set (a coordinator on its
/// own, as tests and single-log drivers use it).
pub const UNPARTITIONED: i32 = 0;

/// What [`Coordinator::load_partition`] did with a partition's log.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Loaded {
    /// Entries applied (commits and tombstones of this partition's groups).
    pub applied: usize,
    /// Entries of groups that belong to other partitions, skipped.
    pub foreign: usize,
}

impl Coordinator {
    /// Tells which groups this broker coordinates (the `__consumer_offsets` partitions it leads).
    /// Partitions no longer led are unloaded at once: their groups are forgotten and whatever
    /// they had parked is answered NOT_COORDINATOR. Newly led ones wait for
    /// [`Coordinator::load_partition`] ([`Coordinator::partitions_to_load`] lists them). Until the
    /// first call, every group is coordinated here and [`Coordinator::load_offsets`] loads them.
    pub fn set_coordinated(&mut self, coordinated: Coordinated) {
        if self.coordinated.as_ref() == Some(&coordinated) {
            return;
        }
        let partitions_changed = self
            .coordinated
            .as_ref()
            .is_some_and(|old| old.partitions != coordinated.partitions);
        let resigned: Vec<i32> = self
            .loaded_partitions
            .iter()
            .copied()
            .filter(|partition| partitions_changed || !coordinated.led.contains(partition))
            .collect();
        let dropped: Vec<String> = if partitions_changed || self.coordinated.is_none() {
            // Every group's partition moved: nothing loaded under the old count stays (N is
            // fixed once the topic exists, so this is a deletion and re-creation of the topic).
            // Groups loaded before partitions were known (`load_offsets`) are not partitioned.
            self.groups.keys().cloned().collect()
        } else {
            let resigned: BTreeSet<i32> = resigned.iter().copied().collect();
            self.groups
                .keys()
                .filter(|group| {
                    resigned.contains(&coordinator_partition(group, coordinated.partitions))
                })
                .cloned()
                .collect()
        };
        for partition in &resigned {
            self.loaded_partitions.remove(partition);
        }
        for group_id in dropped {
            self.unload_group(&group_id);
        }
        let every_group = partitions_changed || self.coordinated.is_none();
        let consumer_dropped: Vec<String> = self
            .consumer_groups
            .group_ids()
            .filter(|group| {
                every_group
                    || resigned.contains(&coordinator_partition(group, coordinated.partitions))
            })
            .map(str::to_owned)
            .collect();
        for group_id in consumer_dropped {
            self.consumer_groups.unload(&group_id);
            self.consumer_group_unloaded(&group_id);
        }
        self.coordinated = Some(coordinated);
    }

    /// The `__consumer_offsets` partition whose log holds `group`'s commits (and whose leader
    /// coordinates it): [`UNPARTITIONED`] until [`Coordinator::set_coordinated`] is called.
    pub fn offsets_partition(&self, group: &str) -> i32 {
        match &self.coordinated {
            Some(coordinated) if coordinated.partitions > 0 => {
                coordinator_partition(group, coordinated.partitions)
            }
            _ => UNPARTITIONED,
        }
    }

    /// The led partitions whose offsets are not loaded yet, in order.
    pub fn partitions_to_load(&self) -> Vec<i32> {
        self.coordinated
            .as_ref()
            .map(|coordinated| {
                coordinated
                    .led
                    .iter()
                    .copied()
                    .filter(|partition| !self.loaded_partitions.contains(partition))
                    .collect()
            })
            .unwrap_or_default()
    }

    /// Whether `partition`'s offsets are loaded (its groups are served).
    pub fn is_partition_loaded(&self, partition: i32) -> bool {
        self.loaded_partitions.contains(&partition)
    }

    /// Replays one partition's offsets log (oldest first) and serves its groups from now on. The
    /// last commit of a (group, topic, partition) wins and a tombstone deletes it; transactional
    /// commits stay pending until their producer's marker (a transaction without one stays
    /// pending after the load); entries of groups that belong to another partition are skipped. Ignored (nothing applied) when the
    /// partition is not led here any more, or already loaded: the driver read its log while
    /// leadership moved.
    pub fn load_partition(
        &mut self,
        partition: i32,
        entries: impl IntoIterator<Item = Replayed>,
    ) -> Loaded {
        let mut loaded = Loaded::default();
        let Some(coordinated) = &self.coordinated else {
            return loaded;
        };
        let partitions = coordinated.partitions;
        if !coordinated.led.contains(&partition) || self.loaded_partitions.contains(&partition) {
            return loaded;
        }
        for item in entries {
            let group = match &item {
                Replayed::Entry(entry) | Replayed::Txn(_, entry) => {
                    Some(entry.key().group.as_str())
                }
                Replayed::Consumer(record) => Some(record.group()),
                Replayed::Marker(..) => None,
            };
            if group.is_some_and(|group| coordinator_partition(group, partitions) != partition) {
                loaded.foreign += 1;
                continue;
            }
            loaded.applied += 1;
            self.apply_replayed(item);
        }
        self.loaded_partitions.insert(partition);
        self.consumer_groups_loaded();
        loaded
    }

    /// One replayed entry, in log order.
    pub(super) fn apply_entry(&mut self, entry: OffsetLogEntry) {
        match entry {
            OffsetLogEntry::Commit(key, value) => {
                let sequence = self.next_persist_sequence();
                self.apply_commit(key, value, sequence);
            }
            OffsetLogEntry::Delete(key) => self.apply_delete(&key),
        }
    }

    /// Forgets a group whose partition this broker no longer leads, answering its parked
    /// JoinGroups and SyncGroups with NOT_COORDINATOR (their members find the new coordinator).
    fn unload_group(&mut self, group_id: &str) {
        let Some(group) = self.groups.remove(group_id) else {
            return;
        };
        self.offsets_count -= group.offsets.len();
        self.pending_txn_count -= group.pending_txn_count();
        let not_coordinator = ErrorCode::NOT_COORDINATOR.code();
        for (member_id, member) in group.members {
            if let Some(parked) = member.pending_join {
                let response =
                    super::membership::join_error(parked.version, not_coordinator, &member_id);
                self.reply(
                    parked.request_id,
                    parked.version,
                    Response::JoinGroup(response),
                );
            }
            if let Some(parked) = member.pending_sync {
                self.reply_sync_error(parked, not_coordinator);
            }
        }
    }
}
