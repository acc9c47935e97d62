//! Skiff's broker: the tokio edge that glues the sans-IO protocol core, the storage engine and the
//! pure placement and group state machines to sockets, files and the clock.

pub mod placement;

pub mod load_sampler;
pub mod group;
pub mod producer_state;
