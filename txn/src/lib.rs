//! skiff-txn: the transaction coordinator (KIP-98, KIP-360, KIP-447's producer side, KIP-664,
//! KIP-890's transaction version 2) as a sans-IO state machine, the record codec of
//! `__transaction_state`, and the seeded simulation that checks them.
//!
//! It owns: per transactional id the metadata (producer id, previous and next producer id, epoch,
//! last epoch, timeout, state, partitions, start and last-update times, client transaction
//! version) and Kafka's transitions between its states; which `__transaction_state` partition
//! holds an id; the producer ids it hands out (from blocks the driver claims); when markers must
//! be written and when a transaction times out or an id expires; the bytes of the state log.
//!
//! Must never: read a clock, touch files or sockets, depend on tokio or on the broker (CI greps
//! `txn/src` as it does `group/src`) — time arrives as `now_ms` arguments, the settings as a
//! [`TxnConfig`], leadership as calls, and everything it wants done is returned as an
//! [`Output`]. The broker's `txn` driver is its only IO edge.
//!
//! # Contract with the driver
//!
//! 1. Leadership: [`Coordinator::partition_led`] when this broker becomes leader of a
//!    `__transaction_state` partition (the leader epoch is the coordinator epoch), then read the
//!    partition's log (records decoded by [`log`]) and hand it to
//!    [`Coordinator::load_partition`]; until then its ids are answered
//!    COORDINATOR_LOAD_IN_PROGRESS, and ids of partitions not led here NOT_COORDINATOR.
//!    [`Coordinator::unload_partition`] when leadership is lost.
//! 2. Requests go in through one `handle_*` method each with a [`RequestMeta`]; each is answered
//!    exactly once by an [`Output::Reply`], at once or after its record is durable.
//! 3. After every call the driver drains [`Coordinator::poll_output`]:
//!    - [`Output::Reply`]: encode for the request's version and send;
//!    - [`Output::Persist`]: append the record to that state partition as its leader at that
//!      coordinator epoch (acks=all: acknowledged once replicated), then call
//!      [`Coordinator::persisted`]; the transition takes effect, and its reply goes out, only
//!      then;
//!    - [`Output::SendMarkers`]: write WriteTxnMarkers to each partition's leader, retrying
//!      retriable errors and leader moves; when every partition has it (or no longer exists),
//!      call [`Coordinator::markers_written`]; this writes CompleteCommit/CompleteAbort;
//!    - [`Output::NeedProducerIds`]: claim a block of producer ids durably and call
//!      [`Coordinator::producer_ids_granted`] (requests needing an id wait meanwhile).
//! 4. [`Coordinator::tick`] whenever [`Coordinator::next_deadline_ms`] has passed: timed-out
//!    transactions are aborted with a bumped epoch, expired ids are removed by a tombstone, and
//!    failed Complete appends are retried. `now_ms` never decreases.
//!
//! # Layout
//!
//! - [`config`]: every bound and interval (Kafka's names in the docs).
//! - [`state`]: the states, their legal transitions, one id's metadata, epoch arithmetic.
//! - `coordinator.rs`: [`Coordinator`], its inputs and outputs; applying a durable transition;
//!   markers and the Complete record.
//! - `init.rs`: InitProducerId and the producer-id supply.
//! - `add.rs`: AddPartitionsToTxn (every form) and AddOffsetsToTxn.
//! - `end.rs`: EndTxn, transaction versions 1 and 2.
//! - `loading.rs`: leadership, loading and unloading, timeouts and expiration.
//! - `admin.rs`: DescribeTransactions and ListTransactions.
//! - [`log`]: key/value bytes of `__transaction_state` and their v2-batch wrapping.
//! - `sim.rs`, `tests.rs` (tests only): the seeded simulation and the unit tests.
//!
//! What is not done: KIP-939's two-phase commit (`enable2Pc`, `keepPreparedTxn` are not taken),
//! and Kafka's `hasFailedEpochFence` (a failed fence append bumps again on the retry, which is
//! safe: the epoch only moves forward).

#![deny(missing_docs, unreachable_pub)]
#![cfg_attr(test, allow(clippy::cast_possible_truncation, clippy::cast_sign_loss))]

pub mod config;
pub mod log;
pub mod state;

mod add;
mod admin;
mod coordinator;
mod end;
mod init;
mod loading;

#[cfg(test)]
mod sim;
#[cfg(test)]
mod tests;

pub use add::OFFSETS_TOPIC;
pub use admin::{IdPattern, IdPatternError, ListFilters, ID_PATTERN_COMPILED_BYTES_MAX};
pub use config::TxnConfig;
pub use coordinator::{
    AddPartitions, Coordinator, EndTxn, InitProducerId, Output, PersistError, PersistId, RequestId,
    RequestMeta, Response, TxnDescription, TxnListing,
};
pub use log::{TxnLogError, TxnLogRecord};
pub use state::{TopicPartition, TxnMetadata, TxnState};
