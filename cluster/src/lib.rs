//! skiff-cluster: the metadata side of Skiff's cluster mode, as pure code over the metadata
//! store's vocabulary (docs/design/cluster.md §2–§3, §7).
//!
//! - [`layout`]: every key under `R = /skiff/<cluster>/v1`;
//! - [`records`]: the JSON value of each key, and its bounded decoder;
//! - [`image`]: the cluster image a broker keeps from one GET and a watch;
//! - [`controller`]: the controller's fenced reconcile plan, a function of the image;
//! - [`bundles`]: bundle records, the shedder's load snapshot, and bundle moves and splits;
//! - [`election`]: the ElectLeaders API's decisions and their fenced Txns;
//! - [`reassign`]: partition reassignments (KIP-455): the controller's steps, the
//!   AlterPartitionReassignments writes and what ListPartitionReassignments lists;
//! - [`load`]: when a broker writes its load report, and the Txn;
//! - [`traffic`]: the traffic rates of a load report, from two readings of a broker's counters;
//! - [`membership`]: the Txns a broker writes itself for its membership (registration,
//!   campaign, the cluster id, producer-id blocks) and how their answers read;
//! - [`preferred_leaders`]: each new partition's preferred leader, its bundle's owner;
//! - [`topics`]: the topic changes a broker writes (creation, growth, configs, the deletion
//!   intent) and what it materializes of the image;
//! - [`replica`]: the replica state machine of one partition (leader, follower, ISR, HW);
//! - [`session`]: when a broker may accept writes as a leader (its session provably alive);
//! - [`security`]: the cluster's ACLs and SCRAM users under `R/security/`, and their mirror.
//!
//! The broker's `cluster` module submits these Txns to a `skiff_meta::MetaStore`, feeds the watch
//! into the image and the clock into the session fence; `tests/controller_sim.rs` drives the same
//! code over `skiff_meta::MetaCore` with a fake clock.
//!
//! Must never: read a clock, touch files or sockets, or depend on tokio in its own source (CI
//! greps it); skiff-meta's in-process core is its only store.

// The workspace's lint wall (root Cargo.toml) holds for library code; test code is exempt.
// clippy.toml lets tests unwrap, expect, panic and index; clippy has no such setting for casts,
// so the test build (whose library code the non-test build lints anyway) allows those two.
#![cfg_attr(test, allow(clippy::cast_possible_truncation, clippy::cast_sign_loss))]

pub mod bundles;
pub mod controller;
pub mod election;
pub mod image;
pub mod layout;
pub mod load;
pub mod membership;
pub mod preferred_leaders;
pub mod reassign;
pub mod records;
pub mod replica;
pub mod security;
pub mod session;
#[cfg(test)]
mod test_world;
pub mod topics;
pub mod traffic;

pub use image::{ClusterImage, Versioned};
pub use layout::{Key, Layout};
pub use session::SessionFence;
