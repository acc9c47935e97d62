//! Placement glue: the broker's side of `skiff-placement`, which makes every decision.
//!
//! - [`sampler`]: this process's load on Linux (`/proc`, `statvfs`), turned into the pure crate's
//!   load samples;
//! - [`state`]: the cluster view, the replica policy and a seeded RNG behind one lock, asked by
//!   topic creation, and this node's load and traffic samples. The bundle map is not here: it is
//!   the controller's bundle records in the cluster image, which `/placement/bundles` shows
//!   (`crate::cluster`).
//!
//! Must never: decide a placement itself (selection, bundles, splits and shedding are
//! `skiff-placement`'s pure code), or hold its lock across IO.

pub mod sampler;
pub(crate) mod state;
