//! The broker's side of the consumer-group coordinator. The coordinator itself is the pure crate
//! `skiff-group` (membership, rebalances, committed offsets, the offsets-log codec); this module
//! holds only its IO edge, [`driver`]: the tokio task that owns one `skiff_group::Coordinator`
//! and the producer-id allocator, reads the clock, follows this broker's leaderships of
//! `__consumer_offsets`, replays and appends the offsets logs (as their partitions' leader),
//! compacts them by snapshot, and hands replies back to the handlers.
//!
//! The core types the handlers and embedders name (`Response`, the offsets-log codec and its
//! entries) are re-exported here, so they keep naming one module for everything about groups.
//!
//! Must never: decide group semantics (membership, generations, which offsets are committed,
//! which error a request gets: all skiff-group's), nor grow pure code of its own that the crate
//! could own and test without tokio.

pub mod driver;

pub use skiff_group::{offsets_log, OffsetKey, OffsetLogEntry, OffsetValue, Response};
