//! Skiff's protocol core (placeholder).
