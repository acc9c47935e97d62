//! Unit tests of the coordinator.
