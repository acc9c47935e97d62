//! skiff-group: the classic consumer-group coordinator (JoinGroup, SyncGroup, Heartbeat,
//! LeaveGroup, OffsetCommit, OffsetFetch, DescribeGroups, ListGroups, DeleteGroups, OffsetDelete,
//! TxnOffsetCommit; every version from 0) as a sans-IO state machine, the pure core of KIP-848's
//! consumer groups ([`consumer`]: ConsumerGroupHeartbeat, its assignors, reconciliation and
//! records; the coordinator's entry points for ConsumerGroupHeartbeat and ConsumerGroupDescribe,
//! not yet reachable by a client), the record codec of the internal offsets log, and the
//! seeded simulations that check them.
//!
//! It owns: group membership (member ids, generations, the leader, the chosen protocol, the
//! leader's assignment), session / rebalance / pending-member deadlines, the committed offsets,
//! the transactional offsets pending per producer until their end-transaction marker, which
//! `__consumer_offsets` partition coordinates a group, and the bytes of the offsets log.
//!
//! Must never: read a clock, touch files or sockets, depend on tokio or on the broker (CI greps
//! `group/src` and checks `cargo tree`) — time arrives as `now_ms` arguments, the broker's settings
//! as a [`GroupConfig`], leadership as a [`Coordinated`], and everything it wants done is returned
//! as an [`Output`]. The broker's `group::driver` is its only IO edge: a tokio task that owns one
//! [`Coordinator`], persists its outputs in the offsets logs and reads the clock.
//!
//! # Contract with the driver
//!
//! 1. The driver tells which `__consumer_offsets` partitions this broker leads
//!    ([`Coordinator::set_coordinated`], again whenever that changes), reads the log of each newly
//!    led partition (records decoded by [`offsets_log`]) and hands it to
//!    [`Coordinator::load_partition`]; until then that partition's groups are answered
//!    COORDINATOR_LOAD_IN_PROGRESS, and groups of partitions led elsewhere NOT_COORDINATOR
//!    (`loading.rs`). The consumer group (KIP-848) records of that log are replayed into
//!    [`Coordinator::consumer_groups`], and forgotten with the partition when it is resigned.
//!    A coordinator never told about partitions serves every group from one log, loaded once
//!    with [`Coordinator::load_offsets`] (as the unit tests drive it).
//! 2. Each decoded request goes in through one `handle_*` method with a [`RequestMeta`] (a driver-
//!    chosen [`RequestId`], the request's API version, the client id and host). The method may
//!    answer at once or later: JoinGroup waits until the rebalance completes or times out,
//!    SyncGroup until the leader's assignment arrives, OffsetCommit until its records are
//!    durable.
//! 3. After every call the driver drains [`Coordinator::poll_output`]:
//!    - [`Output::Reply`]: the response struct for that request, already filled for its version;
//!    - [`Output::PersistOffsets`]: append these commits to the offsets log (in the order the
//!      outputs come out), then call [`Coordinator::offsets_persisted`] with the same request id;
//!      only that call produces the OffsetCommit reply, so a commit is acknowledged only once it is
//!      durable;
//!    - [`Output::PersistTxnOffsets`]: the same for a TxnOffsetCommit's commits, written as
//!      transactional batches of its producer ([`offsets_log::encode_txn_batches`]), answered with
//!      [`Coordinator::offsets_persisted`]; they stay pending (invisible to OffsetFetch) until
//!      the producer's marker;
//!    - [`Output::PersistOffsetDeletes`]: the same for tombstones ([`OffsetLogEntry::Delete`]),
//!      answered with [`Coordinator::deletes_persisted`] (DeleteGroups, OffsetDelete);
//!    - [`Output::PersistConsumerRecords`]: a consumer group's (KIP-848) records, from a
//!      ConsumerGroupHeartbeat, a classic member's JoinGroup or LeaveGroup in a consumer group,
//!      an online upgrade or downgrade, or the tick's session and rebalance expiries: append
//!      them as one batch ([`offsets_log::encode_consumer_batch`]) to the named partition, then
//!      call [`Coordinator::consumer_records_persisted`] with the write id; only that call
//!      answers the requests, and a failed write rolls the group back (`consumer_coord.rs`).
//! 4. After an end-transaction marker was appended to a led `__consumer_offsets` partition and
//!    replicated (the partition's WriteTxnMarkers), the driver calls
//!    [`Coordinator::complete_transaction`]: a COMMIT makes the producer's pending offsets of
//!    that partition's groups committed, an ABORT drops them. A replay ([`Replayed`], from
//!    [`offsets_log::decode_replayed_batches`]) meets the markers in the log itself.
//! 5. The driver calls [`Coordinator::tick`] with the current time whenever
//!    [`Coordinator::next_deadline_ms`] has passed (calling it more often is harmless). `now_ms`
//!    must never decrease between calls.
//!
//! A reply whose connection has gone is simply dropped by the driver. Every accepted request gets
//! exactly one reply (the simulation in `sim.rs` checks it).
//!
//! # Wiring (for the driver)
//!
//! - One [`Coordinator`] for the broker, owned by one task (its methods take `&mut self`); the
//!   handlers send it (meta, request) and receive their reply by request id.
//! - The offsets logs are the partitions of the internal topic `__consumer_offsets` (Kafka's
//!   name); a group's commits go to partition [`Coordinator::offsets_partition`]. For
//!   [`Output::PersistOffsets`], the driver turns the commits into [`OffsetLogEntry::Commit`]
//!   records, encodes them with [`offsets_log::encode_batches`], appends and syncs them in that
//!   partition's log, then calls [`Coordinator::offsets_persisted`]. The log cleaner compacts
//!   the logs by key (the latest commit or tombstone of each group's partition wins, as replay
//!   reads them).
//! - OffsetCommit and TxnOffsetCommit need `partition_exists(topic, partition)` from the topic
//!   table.
//!
//! # Layout
//!
//! - [`config`]: every bound and timeout default (Kafka's names in the docs).
//! - `coordinated.rs`: [`coordinator_partition`] (Kafka's hash of the group id) and
//!   [`Coordinated`], the led partitions.
//! - [`state`]: one group and its members; the group states and what each allows.
//! - `coordinator.rs`: [`Coordinator`], its inputs and outputs, ticking.
//! - `loading.rs`: which `__consumer_offsets` partitions are led and loaded; loading and unloading
//!   one partition's groups.
//! - `membership.rs`: JoinGroup, SyncGroup, Heartbeat, LeaveGroup and the rebalance itself.
//! - `offsets.rs`: OffsetCommit, OffsetFetch and the committed-offset table.
//! - `txn_offsets.rs`: TxnOffsetCommit (KIP-447's fencing), the pending transactional offsets,
//!   their completion by a marker (live or replayed), and their bound.
//! - `admin.rs`: DescribeGroups, ListGroups.
//! - `consumer_coord.rs`: ConsumerGroupHeartbeat and ConsumerGroupDescribe routed by group id,
//!   their writes, one in flight per group, rolled back when they fail, and the expiries' writes.
//! - `migration.rs`: classic and consumer groups under one id as Kafka 4.1.1 runs them with
//!   `group.consumer.migration.policy`: the online upgrade and downgrade, an empty consumer group
//!   replaced by a classic one, and classic JoinGroup/SyncGroup/Heartbeat/LeaveGroup served by a
//!   consumer group through the consumer groups' write path.
//! - `deletion.rs`: DeleteGroups and OffsetDelete (tombstones through
//!   [`Output::PersistOffsetDeletes`], answered after [`Coordinator::deletes_persisted`]).
//! - [`offsets_log`]: key/value bytes of one commit and their v2-batch wrapping (bounded decode);
//!   a replay also yields the consumer group records ([`Replayed::Consumer`]), which the classic
//!   coordinator skips.
//! - [`consumer`]: KIP-848 consumer groups as Kafka 4.1.1 runs them, pure: `assignor` (uniform,
//!   range), `reconcile` (a member's step towards its target), `regex` (topic patterns),
//!   `records` (the `__consumer_offsets` records, byte-compatible), `group` (the heartbeat state
//!   machine, deadlines, offset validation, describe), `classic` (classic members in a consumer
//!   group, the conversions' consumer side), `embedded` (the consumer protocol inside classic
//!   JoinGroup/SyncGroup bytes). A group id names a classic group or a consumer group; the
//!   coordinator routes it (`consumer/mod.rs`).
//! - `sim.rs` (tests only): a seeded simulation of many members checking the invariants, and
//!   `sim/txn.rs` one of transactional producers, markers and restarts, `sim/consumer.rs` one of
//!   KIP-848 clients heartbeating through the coordinator, revoking, crashing and pausing while
//!   writes fail and the coordinator restarts by replaying only its durable records,
//!   `sim/migration.rs` one of classic and consumer-protocol clients replacing each other so the
//!   group is upgraded and downgraded again and again (static clients among them);
//!   `tests.rs` and `tests/` (tests only): the unit and property tests of each API.
//!
//! What is not done: offsets retention (`retention_time_ms` is accepted and ignored, offsets live
//! until deleted), classic group metadata persistence (after a restart classic groups are empty
//! and members rejoin; only offsets survive; a consumer group's classic members are in its
//! records and survive).

#![deny(missing_docs, unreachable_pub)]
// The workspace's lint wall (root Cargo.toml) holds for library code; test code is exempt.
// clippy.toml lets tests unwrap, expect, panic and index; clippy has no such setting for casts,
// so the test build (whose library code the non-test build lints anyway) allows those two.
#![cfg_attr(test, allow(clippy::cast_possible_truncation, clippy::cast_sign_loss))]

pub mod config;
pub mod consumer;
pub mod offsets_log;
pub mod state;

mod admin;
mod consumer_coord;
mod coordinated;
mod coordinator;
mod deletion;
mod loading;
mod membership;
mod migration;
mod offsets;
mod txn_offsets;

#[cfg(test)]
mod sim;
#[cfg(test)]
mod tests;

pub use config::{GroupConfig, GroupKeys};
pub use consumer_coord::{
    ConsumerWriteId, CONSUMER_WRITE_BYTES_MAX, EXPIRY_RETRY_BACKOFF_MS, PARKED_HEARTBEATS_MAX,
};
pub use coordinated::{coordinator_partition, Coordinated};
pub use coordinator::{Coordinator, Output, PersistError, RequestId, RequestMeta, Response};
pub use loading::{Loaded, UNPARTITIONED};
pub use offsets_log::{OffsetKey, OffsetLogEntry, OffsetValue, Replayed, TxnProducer};
pub use state::GroupState;
pub use txn_offsets::TxnCompletion;
