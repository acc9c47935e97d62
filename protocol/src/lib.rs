//! Skiff's protocol core: pure code over bytes. It owns Kafka's wire layouts — frames, request and
//! response headers, bounded request decoders, record formats v0/v1/v2 — and the lazy chunked
//! down-converter that serves legacy consumers from v2 storage.
//!
//! Must never: open sockets or files, read a clock, depend on tokio, or allocate by a count read
//! from a peer without checking it (see [`codec::capacity_for`]).

#![deny(missing_docs)]
// Panic-free on input (docs/style.md practice 6): anything a peer sends is an error, never a panic.
// The clippy wall that holds this is the workspace's (`[workspace.lints]` in the root Cargo.toml);
// every `#[allow]` of it carries an `// INVARIANT:` comment. Test code is exempt: clippy.toml lets
// tests unwrap, expect, panic and index; clippy has no such setting for casts, so the test build
// (whose library code the non-test build lints anyway) allows those two.
#![cfg_attr(test, allow(clippy::cast_possible_truncation, clippy::cast_sign_loss))]

pub mod api;
pub mod codec;
pub mod down_convert;
pub mod error;
pub mod error_code;
pub mod frame;
pub mod header;
pub mod limits;
mod past_crate;
pub mod records;
pub mod release;
pub mod requests;
pub mod responses;
pub mod topic_name;
pub mod up_convert;

#[cfg(test)]
mod txn_fixtures;

pub use error::DecodeError;
