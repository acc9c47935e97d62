//! Seeded simulation.
