//! Skiff's protocol core: pure code over bytes. It owns Kafka's wire layouts — frames, request and
//! response headers, bounded request decoders, record formats v0/v1/v2 — and the lazy chunked
//! down-converter that serves legacy consumers from v2 storage.
//!
//! Must never: open sockets or files, read a clock, depend on tokio, or allocate by a count read
//! from a peer without checking it (see [`codec::capacity_for`]).

pub mod api;
pub mod codec;
pub mod down_convert;
pub mod error;
pub mod frame;
pub mod header;
pub mod limits;
pub mod records;
pub mod up_convert;
pub mod requests;
pub mod responses;

pub use error::DecodeError;
