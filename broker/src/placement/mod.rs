//! Replica placement and bundle ownership (placeholder, filled by the placement work).
