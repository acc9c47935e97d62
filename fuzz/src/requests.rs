//! Fuzz bodies for framing and request decoding.

/// Targets of this module.
pub const TARGETS: &[crate::Target] = &[];
