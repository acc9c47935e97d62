//! The consumer group simulation's driver: what the broker's group driver does for a
//! [`Coordinator`]'s consumer group outputs. Writes append to the simulated log, or fail (then
//! nothing is appended); replies go back to the client that sent the heartbeat.

use skiff_protocol::responses::consumer_group::ConsumerGroupHeartbeatResponse;

use super::*;
use crate::{Coordinator, GroupConfig, GroupKeys, Output, PersistError, RequestMeta, Response};

/// Chance that a write fails while faults are on.
const WRITE_FAILURE_PROBABILITY: f64 = 0.05;

/// A coordinator loaded from the durable `log` (a start or a restart).
pub(super) fn coordinator(log: &[ConsumerRecord]) -> Coordinator {
    let mut coordinator = Coordinator::new(GroupConfig::new(GroupKeys::KAFKA_DEFAULTS, 1));
    coordinator.consumer_groups_mut().set_config(config());
    let replayed: Vec<Replayed> = log.iter().cloned().map(Replayed::Consumer).collect();
    coordinator.load_offsets(replayed);
    coordinator
}

/// A heartbeat's answer as the client reads it, or the error code and message.
pub(super) type Answer = Result<crate::consumer::HeartbeatResponse, (i16, Option<String>)>;

fn answer(response: ConsumerGroupHeartbeatResponse) -> Answer {
    if response.error_code != 0 {
        return Err((response.error_code, response.error_message));
    }
    let assignment = response.assignment.map(|topics| {
        topics
            .into_iter()
            .map(|topic| {
                let id = TopicId(*topic.topic_id.as_bytes());
                (id, topic.partitions.into_iter().collect())
            })
            .collect()
    });
    Ok(crate::consumer::HeartbeatResponse {
        member_id: response.member_id.unwrap_or_default(),
        member_epoch: response.member_epoch,
        heartbeat_interval_ms: response.heartbeat_interval_ms,
        assignment,
    })
}

impl Sim {
    /// Sends one heartbeat and carries out the outputs until it is answered; its answer as the
    /// client reads it, or the error code and message.
    pub(super) fn exchange(&mut self, request: &HeartbeatRequest) -> Answer {
        let mut answers = self.exchange_together(std::slice::from_ref(request));
        answers.remove(0)
    }

    /// Sends every heartbeat before any is answered (clients heartbeating at once: all but the
    /// first wait behind its write), then carries out the outputs; each answer, in request order.
    /// Every heartbeat is answered exactly once.
    pub(super) fn exchange_together(&mut self, requests: &[HeartbeatRequest]) -> Vec<Answer> {
        let first = self.next_request + 1;
        for request in requests {
            self.next_request += 1;
            let meta = RequestMeta {
                request_id: self.next_request,
                version: 1,
                client_id: "sim".to_owned(),
                client_host: "/127.0.0.1".to_owned(),
            };
            self.coord
                .handle_consumer_group_heartbeat(meta, request.clone(), self.now_ms);
        }
        let mut replies: BTreeMap<u64, ConsumerGroupHeartbeatResponse> = BTreeMap::new();
        for (request_id, response) in self.settle() {
            let again = replies.insert(request_id, response);
            assert!(again.is_none(), "heartbeat {request_id} answered twice");
        }
        let expected: Vec<u64> = (first..=self.next_request).collect();
        let answered: Vec<u64> = replies.keys().copied().collect();
        assert_eq!(answered, expected, "one reply per heartbeat");
        replies.into_values().map(answer).collect()
    }

    /// Carries out every output: each write succeeds (appended to the log) or, with faults on,
    /// sometimes fails; returns the replies in order. A reply never precedes its write's result.
    pub(super) fn settle(&mut self) -> Vec<(u64, ConsumerGroupHeartbeatResponse)> {
        let mut replies = Vec::new();
        while let Some(output) = self.coord.poll_output() {
            match output {
                Output::PersistConsumerRecords { write, records, .. } => {
                    let members: BTreeSet<&str> = records
                        .iter()
                        .filter_map(|record| match record {
                            ConsumerRecord::CurrentMemberAssignment { member, .. } => {
                                Some(member.as_str())
                            }
                            _ => None,
                        })
                        .collect();
                    let batched = usize::from(members.len() > 1);
                    let result =
                        if self.write_faults && self.rng.gen_bool(WRITE_FAILURE_PROBABILITY) {
                            self.failed_writes += 1;
                            self.batched_writes.1 += batched;
                            Err(if self.rng.gen_bool(0.5) {
                                PersistError::Unavailable
                            } else {
                                PersistError::NotLeader
                            })
                        } else {
                            self.batched_writes.0 += batched;
                            self.log.extend(records);
                            Ok(())
                        };
                    self.coord.consumer_records_persisted(write, result);
                }
                Output::Reply {
                    request_id,
                    response: Response::ConsumerGroupHeartbeat(response),
                    ..
                } => replies.push((request_id, response)),
                other => panic!("unexpected output {other:?}"),
            }
        }
        replies
    }
}
