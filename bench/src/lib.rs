//! Shared helpers for Skiff benchmark binaries.
