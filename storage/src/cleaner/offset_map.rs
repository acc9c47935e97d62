//! [`OffsetMap`]: the cleaner's bounded map from a record key's hash to the latest offset of that
//! key in the dirty section (the role of Kafka's `SkimpyOffsetMap`). Owns its memory bound and
//! its hashing; must never grow past the bytes it was given, nor keep a key's bytes.
//!
//! # Layout and cost
//!
//! One open-addressing table of 20-byte slots: a 128-bit key hash (four `u32`s) and the offset
//! relative to the pass's first dirty offset (`u32`; `u32::MAX` marks an empty slot, so a pass
//! maps fewer than `u32::MAX` offsets and stops there like a full map). Kafka's slot is 24 bytes
//! (a 16-byte MD5 and an 8-byte offset). At the default load factor 0.9 that is 22.2 bytes per
//! mapped key (Kafka: 26.7). Lookups probe linearly from the slot the hash names.
//!
//! A pass uses only as many slots as its dirty section could need (its offset count, at most
//! one key each, over the load factor), from the start of the table: a dirty section of a
//! million offsets then probes 22 MB, not a whole 128 MiB buffer. Every lookup is a random
//! access, and a table that fits the caches better costs less CPU (`examples/clean_cpu`, 1 M
//! records with a 128 MiB buffer: 252 MiB of log per CPU second, against 136–160 when every
//! pass used the whole table).
//!
//! # Why a 128-bit hash is safe enough
//!
//! Two different keys with the same hash would make the cleaner drop the older key's latest
//! record: the one loss compaction may never cause. The hash is two SipHash-1-3 values under
//! independent random keys (`std`'s `RandomState`, drawn per map), so a producer cannot craft
//! colliding keys, and for `n` distinct keys the chance of any collision in a pass is at most
//! `n² / 2¹²⁹`: with the 100 million keys a 2 GiB buffer holds, about 1.5 × 10⁻²³ per pass.
//! Kafka's MD5 is also 128 bits (unkeyed). A 64-bit hash would be 10⁻⁵ per such pass: not enough.

use std::hash::{BuildHasher, RandomState};

use crate::error::{Error, Result};
use crate::limits::{OFFSET_MAP_BYTES_MAX, OFFSET_MAP_BYTES_MIN};

/// Bytes of one slot: four `u32` words of hash and one of relative offset.
pub const OFFSET_MAP_SLOT_BYTES: usize = 20;
/// The relative offset of an empty slot.
const EMPTY: u32 = u32::MAX;

/// A bounded map from key hashes to offsets, reused across cleanings (the broker makes one per
/// cleaner thread from `log.cleaner.dedupe.buffer.size / log.cleaner.threads`).
#[derive(Debug)]
pub struct OffsetMap {
    slots: Vec<[u32; 5]>,
    /// Most keys held: `slots × load factor`.
    capacity: usize,
    load_factor: f64,
    /// Slots this pass uses: a prefix of `slots` (see `clear`).
    active: usize,
    /// Most keys this pass holds: `active × load factor`.
    active_capacity: usize,
    len: usize,
    /// Offsets are stored relative to this (the pass's first dirty offset).
    base_offset: i64,
    hash_low: RandomState,
    hash_high: RandomState,
}

impl OffsetMap {
    /// A map of at most `memory_bytes` bytes of slots, holding at most `load_factor` of them
    /// (Kafka's `log.cleaner.io.buffer.load.factor`, in `(0, 1]`; 0.9 by default).
    /// `memory_bytes` must lie in `[OFFSET_MAP_BYTES_MIN, OFFSET_MAP_BYTES_MAX]` (1 KiB to
    /// 2 GiB, Kafka's largest buffer).
    pub fn with_memory(memory_bytes: usize, load_factor: f64) -> Result<Self> {
        if !(OFFSET_MAP_BYTES_MIN..=OFFSET_MAP_BYTES_MAX).contains(&memory_bytes) {
            return Err(Error::InvalidConfig(format!(
                "offset map of {memory_bytes} bytes not in [{OFFSET_MAP_BYTES_MIN}, {OFFSET_MAP_BYTES_MAX}]"
            )));
        }
        if !(load_factor > 0.0 && load_factor <= 1.0) {
            return Err(Error::InvalidConfig(format!(
                "offset map load factor {load_factor} not in (0, 1]"
            )));
        }
        let slot_count = memory_bytes / OFFSET_MAP_SLOT_BYTES;
        #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
        // INVARIANT: 0 < load_factor ≤ 1, so the product lies in [0, slot_count].
        let capacity = ((slot_count as f64 * load_factor) as usize).clamp(1, slot_count.max(1));
        Ok(Self {
            slots: vec![[0, 0, 0, 0, EMPTY]; slot_count],
            capacity,
            load_factor,
            active: slot_count,
            active_capacity: capacity,
            len: 0,
            base_offset: 0,
            hash_low: RandomState::new(),
            hash_high: RandomState::new(),
        })
    }

    /// Keys the map holds at most.
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// Keys held now.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether no key is held.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Bytes of slots (what the map costs, besides a few words).
    pub fn memory_bytes(&self) -> usize {
        self.slots.len() * OFFSET_MAP_SLOT_BYTES
    }

    /// Share of the slots in use (Kafka's `utilization`, the `max-buffer-utilization-percent`
    /// metric and the "Buffer utilization" log line).
    pub fn utilization(&self) -> f64 {
        if self.slots.is_empty() {
            return 0.0;
        }
        self.len as f64 / self.slots.len() as f64
    }

    /// Empties the map for a pass whose offsets start at `base_offset` and that puts at most
    /// `keys_max` distinct keys (its dirty section's offset count): the pass uses only the slots
    /// those need at the load factor, or all of them if they need more.
    pub(crate) fn clear(&mut self, base_offset: i64, keys_max: u64) {
        let total = self.slots.len();
        #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
        // INVARIANT: a non-negative float, saturated by the cast and then capped at `total`.
        let needed = (keys_max as f64 / self.load_factor).ceil() as usize;
        self.active = needed.saturating_add(1).clamp(1, total.max(1)).min(total);
        #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
        // INVARIANT: 0 < load_factor ≤ 1, so the product lies in [0, active].
        let active_capacity = (self.active as f64 * self.load_factor) as usize;
        self.active_capacity = active_capacity.min(self.capacity);
        for slot in self.slots.iter_mut().take(self.active) {
            slot[4] = EMPTY;
        }
        self.len = 0;
        self.base_offset = base_offset;
    }

    /// Whether `more` new keys fit in this pass.
    pub(crate) fn has_room_for(&self, more: usize) -> bool {
        self.len.saturating_add(more) <= self.active_capacity
    }

    /// Whether `offset` can be stored (relative to the base, below the empty marker).
    pub(crate) fn can_hold_offset(&self, offset: i64) -> bool {
        offset
            .checked_sub(self.base_offset)
            .is_some_and(|relative| (0..i64::from(EMPTY)).contains(&relative))
    }

    fn hash(&self, key: &[u8]) -> [u32; 4] {
        let low = self.hash_low.hash_one(key);
        let high = self.hash_high.hash_one(key);
        // INVARIANT: each half of a u64, so nothing is lost.
        #[allow(clippy::cast_possible_truncation)]
        [
            low as u32,
            (low >> 32) as u32,
            high as u32,
            (high >> 32) as u32,
        ]
    }

    /// The slot holding `hash`, or the empty slot where it would go.
    fn find(&self, hash: &[u32; 4]) -> Option<usize> {
        let count = self.active.min(self.slots.len());
        if count == 0 {
            return None;
        }
        let wide = u64::from(hash[0]) | (u64::from(hash[1]) << 32);
        // INVARIANT: the product's high word is below `count`, a usize.
        #[allow(clippy::cast_possible_truncation)]
        let mut index = ((u128::from(wide) * count as u128) >> 64) as usize;
        for _ in 0..count {
            let slot = self.slots.get(index)?;
            if slot[4] == EMPTY || slot[..4] == hash[..] {
                return Some(index);
            }
            index += 1;
            if index == count {
                index = 0;
            }
        }
        None
    }

    /// Maps `key` to `offset` (a later offset of a key replaces the earlier). `false` if the map
    /// is full or the offset cannot be held (the caller checks [`OffsetMap::has_room_for`] and
    /// [`OffsetMap::can_hold_offset`] per batch first, so this is a backstop).
    pub(crate) fn put(&mut self, key: &[u8], offset: i64) -> bool {
        if !self.can_hold_offset(offset) {
            return false;
        }
        let hash = self.hash(key);
        let Some(index) = self.find(&hash) else {
            return false;
        };
        let relative = u32::try_from(offset - self.base_offset).unwrap_or(EMPTY);
        let capacity = self.active_capacity;
        let Some(slot) = self.slots.get_mut(index) else {
            return false;
        };
        if slot[4] == EMPTY {
            if self.len >= capacity {
                return false;
            }
            self.len += 1;
        }
        *slot = [hash[0], hash[1], hash[2], hash[3], relative];
        true
    }

    /// The latest offset mapped for `key`, if any.
    pub(crate) fn get(&self, key: &[u8]) -> Option<i64> {
        let hash = self.hash(key);
        let slot = self.slots.get(self.find(&hash)?)?;
        (slot[4] != EMPTY).then(|| self.base_offset + i64::from(slot[4]))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::HashMap;

    #[test]
    fn bounds_are_checked_and_the_memory_is_what_was_given() {
        assert!(OffsetMap::with_memory(10, 0.9).is_err());
        assert!(OffsetMap::with_memory(1 << 20, 0.0).is_err());
        assert!(OffsetMap::with_memory(1 << 20, 1.5).is_err());
        assert!(OffsetMap::with_memory(1 << 20, f64::NAN).is_err());
        let map = OffsetMap::with_memory(1 << 20, 0.9).unwrap();
        assert!(map.memory_bytes() <= 1 << 20);
        assert_eq!(map.capacity(), (1 << 20) / OFFSET_MAP_SLOT_BYTES * 9 / 10);
        let per_key = map.memory_bytes() as f64 / map.capacity() as f64;
        assert!(per_key <= 24.0, "{per_key} bytes per key");
    }

    #[test]
    fn a_full_map_refuses_new_keys_but_updates_old_ones() {
        let mut map = OffsetMap::with_memory(1024, 0.5).unwrap();
        map.clear(1000, u64::MAX);
        let capacity = map.capacity();
        for index in 0..capacity {
            assert!(map.put(format!("k{index}").as_bytes(), 1000 + index as i64));
        }
        assert!(!map.has_room_for(1));
        assert!(!map.put(b"new", 5000));
        assert!(map.put(b"k0", 6000), "an update takes no new slot");
        assert_eq!(map.get(b"k0"), Some(6000));
        assert!((map.utilization() - capacity as f64 / 51.0).abs() < 1e-9);
        assert!(!map.put(b"k1", 999), "below the base");
        map.clear(0, u64::MAX);
        assert!(map.is_empty() && map.get(b"k0").is_none());
    }

    #[test]
    fn a_pass_uses_the_slots_its_offsets_need_and_fills_only_past_them() {
        let mut map = OffsetMap::with_memory(64 * 1024, 0.9).unwrap();
        map.clear(0, 100);
        assert!(map.has_room_for(100));
        for key in 0..100u32 {
            assert!(map.put(&key.to_be_bytes(), i64::from(key)));
        }
        for key in 0..100u32 {
            assert_eq!(map.get(&key.to_be_bytes()), Some(i64::from(key)));
        }
        // More keys than the pass said: refused, never lost (the pass stops there).
        map.clear(0, 3);
        let mut put = 0u32;
        for key in 0..100u32 {
            if map.put(&key.to_be_bytes(), i64::from(key)) {
                put += 1;
            }
        }
        assert!((3..100).contains(&put));
        for key in 0..put {
            assert_eq!(map.get(&key.to_be_bytes()), Some(i64::from(key)));
        }
        // A huge bound uses the whole table.
        map.clear(0, u64::MAX);
        assert!(map.has_room_for(map.capacity()));
    }

    proptest! {
        #[test]
        fn the_map_answers_the_latest_offset_of_each_key(
            keys in proptest::collection::vec(0u16..300, 1..600),
        ) {
            let mut map = OffsetMap::with_memory(64 * 1024, 0.9).unwrap();
            map.clear(10, keys.len() as u64);
            let mut truth = HashMap::new();
            for (index, key) in keys.iter().enumerate() {
                let offset = 10 + index as i64;
                prop_assert!(map.put(&key.to_be_bytes(), offset));
                truth.insert(*key, offset);
            }
            prop_assert_eq!(map.len(), truth.len());
            for key in 0u16..300 {
                prop_assert_eq!(map.get(&key.to_be_bytes()), truth.get(&key).copied());
            }
        }
    }
}
