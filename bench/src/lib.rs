//! Shared helpers for Skiff benchmark binaries.
pub mod client;
pub mod cpu;
pub mod idle_connections;
pub mod idle_polls;
pub mod kip283;
pub mod latency;
pub mod responses;
pub mod tls;
