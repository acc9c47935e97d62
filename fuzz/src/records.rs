//! Fuzz bodies for record formats and conversion (v2 batch view, legacy message sets, down-converter).

/// Targets of this module.
pub const TARGETS: &[crate::Target] = &[];
