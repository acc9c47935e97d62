//! Which `__consumer_offsets` partition coordinates a group (Kafka's hash of the group id), and
//! [`Coordinated`]: the partitions this broker leads, so the groups it coordinates.
//!
//! Must never: differ from Kafka's mapping (a group has the same coordinator partition as on a
//! Kafka cluster with as many offsets partitions), or decide leadership (the broker reads it from
//! the cluster image and hands it in).

use std::collections::BTreeSet;

/// Java's `String.hashCode` over the UTF-16 code units of `text`.
fn java_string_hash(text: &str) -> i32 {
    text.encode_utf16().fold(0i32, |hash, unit| {
        hash.wrapping_mul(31).wrapping_add(i32::from(unit))
    })
}

/// The `__consumer_offsets` partition that coordinates `group` among `partitions`: Kafka's
/// `Utils.abs(groupId.hashCode()) % partitions` (its `abs` maps `i32::MIN` to 0), so a group has
/// the same coordinator partition as on a Kafka cluster with as many offsets partitions.
pub fn coordinator_partition(group: &str, partitions: i32) -> i32 {
    debug_assert!(partitions > 0);
    let hash = java_string_hash(group);
    let magnitude = if hash == i32::MIN { 0 } else { hash.abs() };
    magnitude % partitions.max(1)
}

/// The groups a broker coordinates: those whose `__consumer_offsets` partition it leads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Coordinated {
    /// Partitions of `__consumer_offsets` (0 while it does not exist: nothing is coordinated).
    pub partitions: i32,
    /// The ones this broker leads.
    pub led: BTreeSet<i32>,
}

impl Coordinated {
    /// Whether `group` is coordinated here.
    pub fn includes(&self, group: &str) -> bool {
        self.partitions > 0
            && self
                .led
                .contains(&coordinator_partition(group, self.partitions))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_coordinator_partition_is_kafkas() {
        // Values of Java's "…".hashCode(), checked with jshell.
        assert_eq!(java_string_hash(""), 0);
        assert_eq!(java_string_hash("hello"), 99_162_322);
        assert_eq!(java_string_hash("polygenelubricants"), i32::MIN);
        assert_eq!(coordinator_partition("polygenelubricants", 50), 0);
        assert_eq!(coordinator_partition("hello", 50), 99_162_322 % 50);
        // A negative hash: Math.abs, not a mask.
        let negative = "consumer-group-7";
        let hash = java_string_hash(negative);
        assert_eq!(
            coordinator_partition(negative, 50),
            hash.checked_abs().unwrap_or(0) % 50
        );
        // Non-BMP text hashes its UTF-16 surrogates, as Java does.
        assert_eq!(java_string_hash("😀"), 0xD83D * 31 + 0xDE00);
    }
}
