//! Skiff's storage engine (placeholder).
