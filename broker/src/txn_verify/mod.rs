//! KIP-890's defence on the partition leader: before a transactional Produce is appended, the
//! transactional id's coordinator confirms the partition is in the producer's ongoing transaction
//! (Produce v11 and older: AddPartitionsToTxn v4 with `verify_only`, and a partition not in the
//! transaction is refused) or adds it itself (Produce v12, transaction version 2:
//! AddPartitionsToTxn v5). Without it a late batch of an ended transaction, or one whose
//! AddPartitionsToTxn never reached the coordinator, would open a transaction no coordinator
//! will ever end (a hanging transaction holding the last stable offset forever).
//!
//! [`plan`] is the pure part: which partitions of a request need asking (Kafka's shortcut skips a
//! partition whose producer already has a transaction open there at the batch's epoch: the
//! coordinator verified it when it opened), and the Produce error each coordinator answer becomes.
//! [`client`] is the IO edge: one AddPartitionsToTxn per Produce request to the coordinator
//! (all its partitions in one call), over the inter-broker client, bounded in time and bytes.
//!
//! Must never: append a verified partition's batch without the coordinator's answer, or hold a
//! partition lock across the coordinator call (the check runs before the append, and the
//! partition's own checks still run under its lock at the append).

pub mod client;
pub mod plan;
