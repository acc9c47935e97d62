//! Placement glue: the broker's side of `skiff-placement`, which makes every decision.
//!
//! - [`sampler`]: this process's load on Linux (`/proc`, `statvfs`), turned into the pure crate's
//!   load samples;
//! - [`state`]: the cluster view, replica policy and bundle map behind one lock, asked by topic
//!   creation and shown on `/placement/bundles`.
//!
//! Must never: decide a placement itself (selection, bundles, splits and shedding are
//! `skiff-placement`'s pure code), or hold its lock across IO.

pub mod sampler;
pub(crate) mod state;
