//! Fuzz target bodies. Each is a plain function over bytes that asserts a round trip or an
//! invariant, called both by its `fuzz_target!` in `fuzz_targets/` and by `tests/replay.rs`, which
//! replays the committed `corpus/<target>/` in the ordinary test suite on stable.

pub mod broker;
pub mod cluster;
pub mod group;
pub mod meta;
pub mod records;
pub mod requests;
pub mod responses;
pub mod storage;
pub mod txn;

/// A named fuzz target body.
pub type Target = (&'static str, fn(&[u8]));

/// Every target, by the name of its `fuzz_targets/<name>.rs` and `corpus/<name>/`.
pub fn targets() -> Vec<Target> {
    records::TARGETS
        .iter()
        .chain(requests::TARGETS.iter())
        .chain(responses::TARGETS.iter())
        .chain(storage::TARGETS.iter())
        .chain(meta::TARGETS.iter())
        .chain(cluster::TARGETS.iter())
        .chain(group::TARGETS.iter())
        .chain(broker::TARGETS.iter())
        .chain(txn::TARGETS.iter())
        .copied()
        .collect()
}
