//! One classic group: its state, generation, members and the requests parked on them.
//!
//! Must never: decide a transition (that is `membership.rs`'s job); this module only holds data
//! and answers questions about it.

use std::collections::BTreeMap;

use bytes::Bytes;

use super::coordinator::RequestId;

/// The classic group states, with Kafka's names (DescribeGroups and ListGroups report them).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum GroupState {
    /// No members; the group may still hold committed offsets.
    Empty,
    /// A rebalance started: waiting for every member to (re)send JoinGroup, or for the deadline.
    PreparingRebalance,
    /// JoinGroup answered with a new generation: waiting for the leader's SyncGroup.
    CompletingRebalance,
    /// The leader's assignment was handed out; members heartbeat.
    Stable,
}

impl GroupState {
    /// Kafka's name, as DescribeGroups and ListGroups send it.
    pub fn name(self) -> &'static str {
        match self {
            Self::Empty => "Empty",
            Self::PreparingRebalance => "PreparingRebalance",
            Self::CompletingRebalance => "CompletingRebalance",
            Self::Stable => "Stable",
        }
    }
}

/// A request parked until the group can answer it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Parked {
    pub request_id: RequestId,
    pub version: i16,
}

/// One joined member.
#[derive(Debug, Clone)]
pub(super) struct Member {
    pub member_id: String,
    /// Static membership (JoinGroup v5+): the id the member keeps across restarts.
    pub group_instance_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    pub session_timeout_ms: i32,
    pub rebalance_timeout_ms: i32,
    /// (protocol name, metadata) in the member's order of preference.
    pub protocols: Vec<(String, Bytes)>,
    /// What the leader assigned it in the current generation (empty until then).
    pub assignment: Bytes,
    /// Its JoinGroup, parked until the rebalance completes.
    pub pending_join: Option<Parked>,
    /// Its SyncGroup, parked until the leader's assignment arrives.
    pub pending_sync: Option<Parked>,
    /// Expelled at this time unless it heartbeats, joins or syncs first (ignored while a JoinGroup
    /// or SyncGroup is parked: those have their own deadline).
    pub session_deadline_ms: i64,
    /// Whether it sent SyncGroup in the current generation (for the sync deadline).
    pub synced: bool,
}

impl Member {
    /// The metadata it offered for `protocol`.
    pub(crate) fn metadata_for(&self, protocol: &str) -> Option<&Bytes> {
        self.protocols
            .iter()
            .find(|(name, _)| name == protocol)
            .map(|(_, metadata)| metadata)
    }

    /// Whether it offers `protocol`.
    pub(crate) fn supports(&self, protocol: &str) -> bool {
        self.metadata_for(protocol).is_some()
    }

    /// Whether its session deadline applies now (a parked request keeps it alive).
    pub(crate) fn session_counts(&self) -> bool {
        self.pending_join.is_none() && self.pending_sync.is_none()
    }
}

/// The first rebalance of a group that was Empty, holding its join open for more members
/// (Kafka's `group.initial.rebalance.delay.ms`): the group's `rebalance_deadline_ms` is then the
/// end of the current wait, and the join completes there, not when everyone known has joined.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct InitialWait {
    /// No wait ends later than this: the group's rebalance timeout after the rebalance started.
    pub end_ms_max: i64,
    /// A new member joined during the current wait, so it earns one more delay when it ends.
    pub member_added: bool,
}

/// A committed offset as the group holds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommittedOffset {
    /// The next offset the group will consume.
    pub offset: i64,
    /// Leader epoch of the last consumed record, −1 if unknown.
    pub leader_epoch: i32,
    /// The client's metadata string.
    pub metadata: String,
    /// When it was committed (ms since the epoch).
    pub commit_timestamp_ms: i64,
    /// Order in which it was handed to the driver for persisting: a later persist of an older
    /// commit must not overwrite a newer one.
    pub(super) persist_sequence: u64,
}

/// One producer's transactional offset commits for a group (TxnOffsetCommit), pending until its
/// end-transaction marker in the group's offsets log: invisible to OffsetFetch until a COMMIT.
#[derive(Debug, Clone)]
pub(super) struct PendingTxn {
    /// The producer's epoch at its latest TxnOffsetCommit: a marker of an older epoch is stale.
    pub producer_epoch: i16,
    /// By (topic, partition).
    pub offsets: BTreeMap<(String, i32), PendingTxnOffset>,
}

/// One partition's transactional commits of one producer: the latest accepted, and the latest
/// whose record is durable (the one a COMMIT makes visible). Each `persist_sequence` is its
/// record's place in the log.
#[derive(Debug, Clone)]
pub(super) struct PendingTxnOffset {
    /// The latest commit accepted.
    pub latest: CommittedOffset,
    /// Whether `latest`'s record is durable.
    pub latest_durable: bool,
    /// While `latest` is not durable: the latest earlier record that is.
    pub durable: Option<CommittedOffset>,
}

impl PendingTxnOffset {
    /// What a COMMIT marker makes visible: the latest durable record, if any.
    pub(crate) fn committable(self) -> Option<CommittedOffset> {
        if self.latest_durable {
            Some(self.latest)
        } else {
            self.durable
        }
    }
}

/// One group.
#[derive(Debug, Clone)]
pub(super) struct Group {
    pub group_id: String,
    pub state: GroupState,
    pub generation_id: i32,
    /// Set by the first member; `None` for a group that only stores offsets.
    pub protocol_type: Option<String>,
    /// The protocol chosen for the current generation.
    pub protocol_name: Option<String>,
    pub leader: Option<String>,
    /// Joined members, by member id (ordered, so that everything the group does is deterministic).
    pub members: BTreeMap<String, Member>,
    /// Member ids handed out by a MEMBER_ID_REQUIRED answer (JoinGroup v4+), with the time at
    /// which they are forgotten if the member does not come back.
    pub pending_members: BTreeMap<String, i64>,
    /// Static members: group instance id → member id.
    pub static_members: BTreeMap<String, String>,
    /// PreparingRebalance: when the rebalance completes without the members still missing (during
    /// an [`InitialWait`]: when the current wait ends).
    /// CompletingRebalance: when members that have not sent SyncGroup are expelled.
    pub rebalance_deadline_ms: Option<i64>,
    /// Set while PreparingRebalance holds the first join of a formerly Empty group open.
    pub initial_wait: Option<InitialWait>,
    /// Committed offsets by (topic, partition).
    pub offsets: BTreeMap<(String, i32), CommittedOffset>,
    /// Kept, though it may hold nothing, until this time: an OffsetDelete removed its last offset
    /// (see `EMPTIED_GROUP_RETENTION_MS_DEFAULT`).
    pub kept_until_ms: Option<i64>,
    /// Transactional offset commits waiting for their producer's marker, by producer id.
    pub pending_txn: BTreeMap<i64, PendingTxn>,
}

impl Group {
    pub(crate) fn new(group_id: String) -> Self {
        Self {
            group_id,
            state: GroupState::Empty,
            generation_id: 0,
            protocol_type: None,
            protocol_name: None,
            leader: None,
            members: BTreeMap::new(),
            pending_members: BTreeMap::new(),
            static_members: BTreeMap::new(),
            rebalance_deadline_ms: None,
            initial_wait: None,
            offsets: BTreeMap::new(),
            kept_until_ms: None,
            pending_txn: BTreeMap::new(),
        }
    }

    /// Whether some producer's transactional commit of (topic, partition) awaits its marker.
    pub(crate) fn has_pending_txn(&self, topic: &str, partition: i32) -> bool {
        self.pending_txn
            .values()
            .any(|pending| pending.offsets.contains_key(&(topic.to_owned(), partition)))
    }

    /// Pending transactional offsets of the group, over all producers.
    pub(crate) fn pending_txn_count(&self) -> usize {
        self.pending_txn
            .values()
            .map(|pending| pending.offsets.len())
            .sum()
    }

    /// Members plus member ids handed out and not yet used: what `group_members_max` bounds.
    pub(crate) fn size(&self) -> usize {
        self.members.len() + self.pending_members.len()
    }

    /// The longest rebalance timeout among the members: how long a rebalance may wait.
    pub(crate) fn rebalance_timeout_ms(&self) -> i32 {
        self.members
            .values()
            .map(|member| member.rebalance_timeout_ms)
            .max()
            .unwrap_or(0)
    }

    /// Whether every member has sent JoinGroup in this rebalance and no handed-out id is awaited.
    pub(crate) fn all_joined(&self) -> bool {
        self.pending_members.is_empty()
            && self
                .members
                .values()
                .all(|member| member.pending_join.is_some())
    }

    /// The protocols every member supports, each member voting for its most preferred one; the
    /// winner has the most votes (ties: the alphabetically first, so the choice is deterministic).
    pub(crate) fn select_protocol(&self) -> Option<String> {
        let first = self.members.values().next()?;
        let candidates: Vec<&str> = first
            .protocols
            .iter()
            .map(|(name, _)| name.as_str())
            .filter(|name| self.members.values().all(|member| member.supports(name)))
            .collect();
        let mut votes: BTreeMap<&str, usize> = BTreeMap::new();
        for member in self.members.values() {
            let choice = member
                .protocols
                .iter()
                .map(|(name, _)| name.as_str())
                .find(|name| candidates.contains(name));
            if let Some(choice) = choice {
                *votes.entry(choice).or_insert(0) += 1;
            }
        }
        let best = votes.values().copied().max()?;
        votes
            .into_iter()
            .find(|(_, count)| *count == best)
            .map(|(name, _)| name.to_owned())
    }

    /// Whether a member offering `protocols` of `protocol_type` could join (or, as `member_id`,
    /// rejoin): same type as the other members, and at least one protocol all of them support.
    pub(crate) fn accepts(
        &self,
        member_id: Option<&str>,
        protocol_type: &str,
        protocols: &[(String, Bytes)],
    ) -> bool {
        if protocol_type.is_empty() || protocols.is_empty() {
            return false;
        }
        let mut others = self
            .members
            .values()
            .filter(|member| Some(member.member_id.as_str()) != member_id)
            .peekable();
        if others.peek().is_none() {
            return true;
        }
        if self.protocol_type.as_deref() != Some(protocol_type) {
            return false;
        }
        let others: Vec<&Member> = others.collect();
        protocols
            .iter()
            .any(|(name, _)| others.iter().all(|member| member.supports(name)))
    }

    /// The member a group instance id points to, if that static member is joined.
    pub(crate) fn static_member_id(&self, group_instance_id: &str) -> Option<&str> {
        self.static_members
            .get(group_instance_id)
            .map(String::as_str)
    }
}
