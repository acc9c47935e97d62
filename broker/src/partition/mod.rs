//! Topics and their partitions on this broker: each partition and everything done to it (its
//! appends, high watermark, wake-ups of parked fetches and ISR proposals: [`partition`]), what the
//! broker materializes of the cluster image and the file naming it ([`topics`], [`materialized`]),
//! per-topic configs ([`topic_config`]) and what an alter request does to them
//! ([`config_change`]), idempotent producer state ([`producer_state`]), the per-partition signal
//! that wakes long-polling fetches ([`readable_end`]) and each partition's replica machine behind
//! its lock ([`replica`], driven only from [`partition`]). Its byte and record counters are
//! [`crate::metrics::traffic`]; the glue from a fetch to the down-converter is
//! [`crate::response::conversion`].
//!
//! Must never: parse wire bytes (that is `skiff-protocol`), manage segments (that is
//! `skiff-storage`), or let code outside this folder drive a replica machine or advance a
//! partition's readable end.

pub mod config_change;
pub mod materialized;
// The partition lives in `partition::partition`, as the layout names it (Kafka's
// `cluster/Partition.scala` beside its package).
#[allow(clippy::module_inception)]
pub mod partition;
pub mod producer_state;
pub mod readable_end;
pub mod replica;
pub mod topic_config;
pub mod topics;
