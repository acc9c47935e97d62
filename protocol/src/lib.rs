//! Skiff's protocol core: pure code over bytes. It owns Kafka's wire layouts — frames, request and
//! response headers, bounded request decoders, record formats v0/v1/v2 — and the lazy chunked
//! down-converter that serves legacy consumers from v2 storage.
//!
//! Must never: open sockets or files, read a clock, depend on tokio, or allocate by a count read
//! from a peer without checking it (see [`codec::capacity_for`]).

#![deny(missing_docs)]
// Panic-free on input (docs/style.md practice 6): anything a peer sends is an error, never a panic.
// Tests are exempt; every `#[allow]` of these carries an `// INVARIANT:` comment.
#![cfg_attr(
    not(test),
    deny(
        clippy::unwrap_used,
        clippy::expect_used,
        clippy::panic,
        clippy::todo,
        clippy::unimplemented,
        clippy::indexing_slicing,
        clippy::cast_possible_truncation,
        clippy::cast_sign_loss
    )
)]

pub mod api;
pub mod codec;
pub mod down_convert;
pub mod error;
pub mod error_code;
pub mod frame;
pub mod header;
pub mod limits;
pub mod records;
pub mod release;
pub mod requests;
pub mod responses;
pub mod topic_name;
pub mod up_convert;

pub use error::DecodeError;
