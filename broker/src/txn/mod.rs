//! The broker's side of the transaction coordinator. The coordinator itself is the pure crate
//! `skiff-txn` (transactional ids, Kafka's state machine, producer ids, the `__transaction_state`
//! codec); this module holds only its IO edge: [`driver`], the tokio task that owns one
//! `skiff_txn::Coordinator`, reads the clock, follows this broker's leaderships of
//! `__transaction_state`, replays and appends its partitions (as their leader), claims producer-id
//! blocks, and hands replies back to the handlers; and [`markers`], which writes a transaction's
//! COMMIT/ABORT markers to its partitions' leaders over the inter-broker client.
//!
//! Must never: decide transaction semantics (which state follows, which error a request gets:
//! all skiff-txn's), nor grow pure code of its own that the crate could own and test without
//! tokio.

pub mod driver;
pub mod markers;

pub use skiff_txn::{Response, TopicPartition};
