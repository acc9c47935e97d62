//! Helpers shared by the integration tests.

pub mod behaviour;
#[cfg(feature = "etcd")]
pub mod etcd_cluster;
