//! OffsetCommit (v0–v8) and OffsetFetch (v0–v8): who may commit (Kafka's generation and member
//! rules, standalone commits with a negative generation), the per-partition checks, the wait for
//! durability, and the answers in each version's layout (v0/v1 OffsetFetch copy a group error into
//! every partition; v2–v7 carry it at the top; v8 per group); OffsetFetch's `require_stable`
//! (v7+) against the pending transactional commits of `txn_offsets.rs`.
//!
//! Must never: acknowledge a commit before the driver reported it durable, or let an older commit
//! that became durable later overwrite a newer one.

use std::collections::BTreeMap;

use kafka_protocol::messages::offset_commit_response::{
    OffsetCommitResponsePartition, OffsetCommitResponseTopic,
};
use kafka_protocol::messages::offset_fetch_request::OffsetFetchRequestGroup;
use kafka_protocol::messages::offset_fetch_response::{
    OffsetFetchResponseGroup, OffsetFetchResponsePartition, OffsetFetchResponsePartitions,
    OffsetFetchResponseTopic, OffsetFetchResponseTopics,
};
use kafka_protocol::messages::{
    OffsetCommitRequest, OffsetCommitResponse, OffsetFetchRequest, OffsetFetchResponse, TopicName,
};
use kafka_protocol::protocol::StrBytes;
use skiff_protocol::error_code::ErrorCode;

use super::coordinator::{Coordinator, Output, PersistError, RequestId, RequestMeta, Response};
use super::offsets_log::{OffsetKey, OffsetValue};
use super::state::{Group, GroupState};

/// An OffsetCommit waiting for its records to become durable.
#[derive(Debug, Clone)]
pub(super) struct PendingCommit {
    version: i16,
    /// The answer, with the errors of refused partitions already in and the accepted ones at 0.
    response: OffsetCommitResponse,
    /// The accepted commits, with the persist sequence they were handed out with.
    commits: Vec<(OffsetKey, OffsetValue)>,
    persist_sequence: u64,
}

/// The answer of one partition in an OffsetFetch, before it is put in a version's layout.
struct FetchedPartition {
    partition: i32,
    offset: i64,
    leader_epoch: i32,
    metadata: String,
    error_code: i16,
}

/// First OffsetFetch version with `require_stable` (KIP-447).
const REQUIRE_STABLE_VERSION_MIN: i16 = 7;

/// First OffsetFetch version whose groups carry the member id and epoch (KIP-848).
const OFFSET_FETCH_MEMBER_VERSION_MIN: i16 = 9;

/// OffsetFetch topics: `None` asks for every committed partition (v2+).
type TopicQuery = Option<Vec<(String, Vec<i32>)>>;

impl Coordinator {
    /// OffsetCommit, every version. `partition_exists` says whether a topic partition exists
    /// (unknown ones get UNKNOWN_TOPIC_OR_PARTITION, as Kafka answers). The reply comes after
    /// [`Coordinator::offsets_persisted`] unless nothing was accepted.
    pub fn handle_offset_commit(
        &mut self,
        now_ms: i64,
        meta: RequestMeta,
        request: OffsetCommitRequest,
        partition_exists: impl Fn(&str, i32) -> bool,
    ) {
        let version = meta.version;
        let group_id = request.group_id.0.as_str().to_owned();
        let group_error = self.commit_permission(now_ms, version, &request);
        let mut response = OffsetCommitResponse::default();
        let mut commits: Vec<(OffsetKey, OffsetValue)> = Vec::new();
        let mut new_keys = 0usize;
        for topic in &request.topics {
            let mut topic_response = OffsetCommitResponseTopic::default();
            topic_response.name = topic.name.clone();
            for partition in &topic.partitions {
                let key = OffsetKey {
                    group: group_id.clone(),
                    topic: topic.name.0.as_str().to_owned(),
                    partition: partition.partition_index,
                };
                let metadata = partition
                    .committed_metadata
                    .as_ref()
                    .map_or("", StrBytes::as_str);
                let is_new = self
                    .committed_offset(&key.group, &key.topic, key.partition)
                    .is_none();
                let error = if let Err(error) = group_error {
                    Some(error)
                } else if metadata.len() > self.config.offset_metadata_bytes_max {
                    Some(ErrorCode::OFFSET_METADATA_TOO_LARGE)
                } else if !partition_exists(&key.topic, key.partition) {
                    Some(ErrorCode::UNKNOWN_TOPIC_OR_PARTITION)
                } else if is_new
                    && self.offsets_count + new_keys >= self.config.committed_offsets_max
                {
                    Some(ErrorCode::COORDINATOR_NOT_AVAILABLE)
                } else {
                    None
                };
                let mut partition_response = OffsetCommitResponsePartition::default();
                partition_response.partition_index = partition.partition_index;
                partition_response.error_code = error.map_or(0, |error| error.code());
                topic_response.partitions.push(partition_response);
                if error.is_some() {
                    continue;
                }
                new_keys += usize::from(is_new);
                let commit_timestamp_ms = if version == 1 && partition.commit_timestamp >= 0 {
                    partition.commit_timestamp
                } else {
                    now_ms
                };
                let leader_epoch = if version >= 6 {
                    partition.committed_leader_epoch
                } else {
                    -1
                };
                commits.push((
                    key,
                    OffsetValue {
                        offset: partition.committed_offset,
                        leader_epoch,
                        metadata: metadata.to_owned(),
                        commit_timestamp_ms,
                    },
                ));
            }
            response.topics.push(topic_response);
        }
        if commits.is_empty() {
            self.reply(meta.request_id, version, Response::OffsetCommit(response));
            return;
        }
        let persist_sequence = self.next_persist_sequence();
        self.outputs.push_back(Output::PersistOffsets {
            request_id: meta.request_id,
            commits: commits.clone(),
        });
        self.pending_commits.insert(
            meta.request_id,
            PendingCommit {
                version,
                response,
                commits,
                persist_sequence,
            },
        );
    }

    /// Whether the request may commit for its group (Kafka's rules): a negative generation commits
    /// for an empty or unknown group ("standalone" consumers, and every v0 request); otherwise the
    /// member must belong to the group's current generation, and not during CompletingRebalance.
    /// Members that may commit have their session refreshed, as a heartbeat would.
    fn commit_permission(
        &mut self,
        now_ms: i64,
        version: i16,
        request: &OffsetCommitRequest,
    ) -> Result<(), ErrorCode> {
        let group_id = request.group_id.0.as_str();
        if let Some(error) = self.unavailable_for(group_id) {
            return Err(error);
        }
        let generation_id = if version >= 1 {
            request.generation_id_or_member_epoch
        } else {
            -1
        };
        let member_id = request.member_id.as_str();
        if self.consumer_groups.group(group_id).is_some() {
            // Kafka 4.1.1's `ConsumerGroup.validateOffsetCommit`: the member and its epoch
            // (an empty group takes commits with a negative epoch); no session is refreshed.
            return self
                .consumer_groups
                .validate_offset_commit(group_id, member_id, generation_id, false, version)
                .map_err(|error| ErrorCode(error.code()));
        }
        let Some(group) = self.groups.get_mut(group_id) else {
            if generation_id >= 0 {
                // Kafka 4.1.1's `OffsetMetadataManager.validateOffsetCommit`: from v9, for both
                // protocols, the group is not found; before, the generation is illegal.
                return Err(if version >= 9 {
                    ErrorCode::GROUP_ID_NOT_FOUND
                } else {
                    ErrorCode::ILLEGAL_GENERATION
                });
            }
            if self.groups.len() >= self.config.groups_max {
                return Err(ErrorCode::COORDINATOR_NOT_AVAILABLE);
            }
            // The group is created when the commit becomes durable (`apply_commit`).
            return Ok(());
        };
        if generation_id < 0 && group.state == GroupState::Empty {
            return Ok(());
        }
        if version >= 7 {
            if let Some(instance) = &request.group_instance_id {
                if group
                    .static_member_id(instance.as_str())
                    .is_some_and(|holder| holder != member_id)
                {
                    return Err(ErrorCode::FENCED_INSTANCE_ID);
                }
            }
        }
        if group.state == GroupState::CompletingRebalance {
            return Err(ErrorCode::REBALANCE_IN_PROGRESS);
        }
        let generation_current = group.generation_id;
        let Some(member) = group.members.get_mut(member_id) else {
            return Err(ErrorCode::UNKNOWN_MEMBER_ID);
        };
        if generation_id != generation_current {
            return Err(ErrorCode::ILLEGAL_GENERATION);
        }
        member.session_deadline_ms = now_ms.saturating_add(i64::from(member.session_timeout_ms));
        Ok(())
    }

    /// The driver's answer to [`Output::PersistOffsets`] and [`Output::PersistTxnOffsets`]: on
    /// success the commits take effect (a TxnOffsetCommit's stay pending until their marker) and
    /// the request is answered; on failure the accepted partitions get the failure's error. An
    /// unknown request id (answered already, or never issued) is ignored.
    pub fn offsets_persisted(&mut self, request_id: RequestId, result: Result<(), PersistError>) {
        if self.txn_offsets_persisted(request_id, result) {
            return;
        }
        let Some(pending) = self.pending_commits.remove(&request_id) else {
            return;
        };
        let PendingCommit {
            version,
            mut response,
            commits,
            persist_sequence,
        } = pending;
        // The group's partition may have been unloaded while the records were written (its
        // leadership went): they are durable in that partition's log, which its next leader
        // loads, but this broker no longer holds the group, so the commit is answered as Kafka
        // answers it then.
        let resigned = commits
            .first()
            .and_then(|(key, _)| self.unavailable_for(&key.group));
        let failure = match (result, resigned) {
            (Err(error), _) => Some(error.error_code()),
            (Ok(()), Some(error)) => Some(error.code()),
            (Ok(()), None) => None,
        };
        if let Some(error_code) = failure {
            let failed: std::collections::BTreeSet<(&str, i32)> = commits
                .iter()
                .map(|(key, _)| (key.topic.as_str(), key.partition))
                .collect();
            for topic in &mut response.topics {
                for partition in &mut topic.partitions {
                    if failed.contains(&(topic.name.0.as_str(), partition.partition_index)) {
                        partition.error_code = error_code;
                    }
                }
            }
        } else {
            for (key, value) in commits {
                self.apply_commit(key, value, persist_sequence);
            }
        }
        self.reply(request_id, version, Response::OffsetCommit(response));
    }

    /// OffsetFetch, every version. Answers at once with the durable offsets; with `require_stable`
    /// (v7+) a partition with a transactional commit awaiting its marker answers
    /// UNSTABLE_OFFSET_COMMIT instead (the client retries until the transaction ends).
    pub fn handle_offset_fetch(&mut self, meta: RequestMeta, request: OffsetFetchRequest) {
        let version = meta.version;
        let require_stable = version >= REQUIRE_STABLE_VERSION_MIN && request.require_stable;
        let mut response = OffsetFetchResponse::default();
        if version >= 8 {
            for group in &request.groups {
                let group_response = self.fetch_group(group, version, require_stable);
                response.groups.push(group_response);
            }
        } else {
            // v0/v1 always name their partitions; a null list ("all") exists from v2.
            let query: TopicQuery = match &request.topics {
                Some(topics) => Some(
                    topics
                        .iter()
                        .map(|t| (t.name.0.as_str().to_owned(), t.partition_indexes.clone()))
                        .collect(),
                ),
                None if version < 2 => Some(Vec::new()),
                None => None,
            };
            let (error_code, topics) = self.fetch_offsets(
                request.group_id.0.as_str(),
                &query,
                (version, require_stable),
                None,
            );
            if version >= 2 {
                response.error_code = error_code;
            }
            response.topics = topics
                .into_iter()
                .map(|(name, partitions)| {
                    let mut topic = OffsetFetchResponseTopic::default();
                    topic.name = TopicName(StrBytes::from_string(name));
                    topic.partitions = partitions
                        .into_iter()
                        .map(|p| {
                            let mut out = OffsetFetchResponsePartition::default();
                            out.partition_index = p.partition;
                            out.committed_offset = p.offset;
                            if version >= 5 {
                                out.committed_leader_epoch = p.leader_epoch;
                            }
                            out.metadata = Some(StrBytes::from_string(p.metadata));
                            out.error_code = p.error_code;
                            out
                        })
                        .collect();
                    topic
                })
                .collect();
        }
        self.reply(meta.request_id, version, Response::OffsetFetch(response));
    }

    /// One group of an OffsetFetch v8+.
    fn fetch_group(
        &self,
        group: &OffsetFetchRequestGroup,
        version: i16,
        require_stable: bool,
    ) -> OffsetFetchResponseGroup {
        let query: TopicQuery = group.topics.as_ref().map(|topics| {
            topics
                .iter()
                .map(|t| (t.name.0.as_str().to_owned(), t.partition_indexes.clone()))
                .collect()
        });
        // v9 names the member (KIP-848): a consumer group checks it and its epoch.
        let member = (version >= OFFSET_FETCH_MEMBER_VERSION_MIN).then(|| {
            (
                group.member_id.as_ref().map(StrBytes::as_str),
                group.member_epoch,
            )
        });
        let (error_code, topics) = self.fetch_offsets(
            group.group_id.0.as_str(),
            &query,
            (version, require_stable),
            member,
        );
        let mut group_response = OffsetFetchResponseGroup::default();
        group_response.group_id = group.group_id.clone();
        group_response.error_code = error_code;
        group_response.topics = topics.into_iter().map(group_topic).collect();
        group_response
    }

    /// One group's offsets for `query`, with the group-level error: in v0/v1 (no top-level error
    /// field) the group error is copied into every requested partition and the returned code is 0;
    /// from v2 the partitions are left out and the code is returned.
    fn fetch_offsets(
        &self,
        group_id: &str,
        query: &TopicQuery,
        (version, require_stable): (i16, bool),
        member: Option<(Option<&str>, i32)>,
    ) -> (i16, Vec<(String, Vec<FetchedPartition>)>) {
        let group_error = self
            .unavailable_for(group_id)
            .map(ErrorCode::code)
            .or_else(|| {
                // Kafka 4.1.1's `ConsumerGroup.validateOffsetFetch`.
                let (member_id, member_epoch) = member?;
                self.consumer_groups
                    .validate_offset_fetch(group_id, member_id, member_epoch)
                    .err()
                    .map(|error| error.code())
            });
        if let Some(error_code) = group_error {
            if version >= 2 {
                return (error_code, Vec::new());
            }
            let topics = query
                .iter()
                .flatten()
                .map(|(topic, partitions)| {
                    let answers = partitions
                        .iter()
                        .map(|partition| FetchedPartition {
                            partition: *partition,
                            offset: -1,
                            leader_epoch: -1,
                            metadata: String::new(),
                            error_code,
                        })
                        .collect();
                    (topic.clone(), answers)
                })
                .collect();
            return (0, topics);
        }
        let group = self.groups.get(group_id);
        let topics = match query {
            Some(topics) => topics
                .iter()
                .map(|(topic, partitions)| {
                    let answers = partitions
                        .iter()
                        .map(|partition| {
                            fetched(group, topic, *partition, (version, require_stable))
                        })
                        .collect();
                    (topic.clone(), answers)
                })
                .collect(),
            None => {
                let mut by_topic: BTreeMap<String, Vec<FetchedPartition>> = BTreeMap::new();
                for ((topic, partition), _) in group.iter().flat_map(|group| group.offsets.iter()) {
                    by_topic.entry(topic.clone()).or_default().push(fetched(
                        group,
                        topic,
                        *partition,
                        (version, require_stable),
                    ));
                }
                by_topic.into_iter().collect()
            }
        };
        (0, topics)
    }
}

/// One topic of a v8 group answer.
fn group_topic((name, partitions): (String, Vec<FetchedPartition>)) -> OffsetFetchResponseTopics {
    let mut topic = OffsetFetchResponseTopics::default();
    topic.name = TopicName(StrBytes::from_string(name));
    topic.partitions = partitions
        .into_iter()
        .map(|p| {
            let mut out = OffsetFetchResponsePartitions::default();
            out.partition_index = p.partition;
            out.committed_offset = p.offset;
            out.committed_leader_epoch = p.leader_epoch;
            out.metadata = Some(StrBytes::from_string(p.metadata));
            out.error_code = p.error_code;
            out
        })
        .collect();
    topic
}

/// One partition's committed offset, or "none" (−1; v0, which read ZooKeeper in Kafka, answers
/// UNKNOWN_TOPIC_OR_PARTITION instead); UNSTABLE_OFFSET_COMMIT (and −1) when the request requires
/// stable offsets and a transactional commit of the partition is pending.
fn fetched(
    group: Option<&Group>,
    topic: &str,
    partition: i32,
    (version, require_stable): (i16, bool),
) -> FetchedPartition {
    if require_stable && group.is_some_and(|group| group.has_pending_txn(topic, partition)) {
        return FetchedPartition {
            partition,
            offset: -1,
            leader_epoch: -1,
            metadata: String::new(),
            error_code: ErrorCode::UNSTABLE_OFFSET_COMMIT.code(),
        };
    }
    match group.and_then(|group| group.offsets.get(&(topic.to_owned(), partition))) {
        Some(committed) => FetchedPartition {
            partition,
            offset: committed.offset,
            leader_epoch: committed.leader_epoch,
            metadata: committed.metadata.clone(),
            error_code: 0,
        },
        None => FetchedPartition {
            partition,
            offset: -1,
            leader_epoch: -1,
            metadata: String::new(),
            error_code: if version == 0 {
                ErrorCode::UNKNOWN_TOPIC_OR_PARTITION.code()
            } else {
                0
            },
        },
    }
}
