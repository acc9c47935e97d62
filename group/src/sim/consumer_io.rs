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

impl Sim {
    /// Sends one heartbeat and carries out the outputs until it is answered; its answer as the
    /// client reads it, or the error code and message.
    pub(super) fn exchange(
        &mut self,
        request: &HeartbeatRequest,
    ) -> Result<crate::consumer::HeartbeatResponse, (i16, Option<String>)> {
        self.next_request += 1;
        let request_id = self.next_request;
        let meta = RequestMeta {
            request_id,
            version: 1,
            client_id: "sim".to_owned(),
            client_host: "/127.0.0.1".to_owned(),
        };
        self.coord
            .handle_consumer_group_heartbeat(meta, request.clone(), self.now_ms);
        let mut replies = self.settle();
        assert_eq!(replies.len(), 1, "one reply per heartbeat: {replies:?}");
        let (answered, response) = replies.remove(0);
        assert_eq!(answered, request_id);
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

    /// Carries out every output: each write succeeds (appended to the log) or, with faults on,
    /// sometimes fails; returns the replies in order. A reply never precedes its write's result.
    pub(super) fn settle(&mut self) -> Vec<(u64, ConsumerGroupHeartbeatResponse)> {
        let mut replies = Vec::new();
        while let Some(output) = self.coord.poll_output() {
            match output {
                Output::PersistConsumerRecords { write, records, .. } => {
                    let result =
                        if self.write_faults && self.rng.gen_bool(WRITE_FAILURE_PROBABILITY) {
                            self.failed_writes += 1;
                            Err(if self.rng.gen_bool(0.5) {
                                PersistError::Unavailable
                            } else {
                                PersistError::NotLeader
                            })
                        } else {
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
