//! Pure planning of a compacted log's cleaning (Kafka's `LogCleanerManager.cleanableOffsets`,
//! `maxCompactionDelay` and `grabFilthiestCompactedLog`): from a summary of the segments, the
//! first dirty offset, the caller's upper bound and time, which range may be cleaned, how dirty
//! the log is, whether `max_compaction_lag_ms` forces a cleaning, and, among many logs, which to
//! clean next. Owns those rules; must never read a file, a clock or a lock.

use crate::config::LogConfig;

/// What planning needs of one segment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct SegmentSummary {
    pub(crate) base_offset: i64,
    pub(crate) size_bytes: u64,
    /// Greatest batch max timestamp, −1 if none.
    pub(crate) max_timestamp_ms: i64,
    /// The first batch's max timestamp (Kafka's `rollingBasedTimestamp`), if any batch.
    pub(crate) first_batch_timestamp_ms: Option<i64>,
}

/// The offsets of a log a planning reads, besides its segments.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct LogOffsets {
    pub(crate) log_start_offset: i64,
    pub(crate) log_end_offset: i64,
    /// The cleaner checkpoint's first dirty offset, if the log has one.
    pub(crate) checkpointed_first_dirty: Option<i64>,
}

/// One compacted log's cleaning plan: what [`crate::Log::cleaning_plan`] answers, what
/// [`choose_filthiest`] chooses among and what [`crate::Log::clean`] carries out.
#[derive(Debug, Clone, Copy, PartialEq)]
#[non_exhaustive]
pub struct CleanPlan {
    /// The first offset not yet cleaned (the checkpoint's, brought within the log).
    pub first_dirty_offset: i64,
    /// The first offset that may not be cleaned: the least of the caller's upper bound, the
    /// active segment's base and the first dirty segment newer than `min_compaction_lag_ms`
    /// (never below `first_dirty_offset`). The cleanable range is
    /// `[first_dirty_offset, first_uncleanable_offset)`.
    pub first_uncleanable_offset: i64,
    /// Bytes of the segments before the first dirty offset (Kafka's `cleanBytes`).
    pub clean_bytes: u64,
    /// Bytes of the segments of the cleanable range (Kafka's `cleanableBytes`).
    pub cleanable_bytes: u64,
    /// `cleanable_bytes / (clean_bytes + cleanable_bytes)` (0 for an empty log).
    pub dirty_ratio: f64,
    /// The log's `min_cleanable_dirty_ratio`.
    pub min_cleanable_ratio: f64,
    /// How far past `max_compaction_lag_ms` the oldest dirty segment's first batch is (0 if
    /// none is): Kafka's compaction delay, the `max-compaction-delay-secs` metric.
    pub compaction_delay_ms: i64,
    /// The checkpointed first dirty offset lay outside the log and was reset to its start
    /// (Kafka's `forceUpdateCheckpoint`).
    pub checkpoint_reset: bool,
    /// The log start offset when planned ([`crate::Log::clean`] aborts if it moved).
    pub log_start_offset: i64,
}

impl CleanPlan {
    /// Whether `max_compaction_lag_ms` forces a cleaning (Kafka's `needCompactionNow`).
    pub fn forced(&self) -> bool {
        self.compaction_delay_ms > 0
    }

    /// Whether the log should be cleaned now: dirtier than its ratio, or forced with something
    /// to clean (`grabFilthiestCompactedLog`'s filter).
    pub fn is_due(&self) -> bool {
        (self.forced() && self.cleanable_bytes > 0) || self.dirty_ratio > self.min_cleanable_ratio
    }
}

/// The first dirty offset: the checkpoint's, or the log start if it has none or it lies outside
/// `[log start, log end]` (a truncation or retention made it stale), with whether it was reset.
fn first_dirty(offsets: &LogOffsets) -> (i64, bool) {
    match offsets.checkpointed_first_dirty {
        None => (offsets.log_start_offset, false),
        Some(offset) if offset < offsets.log_start_offset || offset > offsets.log_end_offset => {
            (offsets.log_start_offset, true)
        }
        Some(offset) => (offset, false),
    }
}

/// The non-active segments that hold offsets at or after `from` (the floor segment of `from`
/// and every later one but the last).
fn non_active_from(segments: &[SegmentSummary], from: i64) -> &[SegmentSummary] {
    let non_active = segments.split_last().map_or(&[][..], |(_, rest)| rest);
    let first = non_active
        .iter()
        .rposition(|segment| segment.base_offset <= from)
        .unwrap_or(0);
    non_active.get(first..).unwrap_or_default()
}

/// Bytes of the segments overlapping `[from, to)` (Kafka's `logSegments(from, to)`: the floor
/// segment of `from` up to the last whose base is below `to`).
fn bytes_between(segments: &[SegmentSummary], from: i64, to: i64) -> u64 {
    let first = segments
        .iter()
        .rposition(|segment| segment.base_offset <= from)
        .unwrap_or(0);
    segments
        .iter()
        .skip(first)
        .take_while(|segment| segment.base_offset < to)
        .map(|segment| segment.size_bytes)
        .sum()
}

/// Plans the cleaning of one log. `segments` are in base-offset order, the last the active one
/// (never empty for a recovered log; an empty slice plans nothing to clean). `upper_bound` is
/// the caller's limit (the high watermark, or the last stable offset).
pub(crate) fn plan(
    segments: &[SegmentSummary],
    offsets: &LogOffsets,
    upper_bound: i64,
    now_ms: i64,
    config: &LogConfig,
) -> CleanPlan {
    let (first_dirty_offset, checkpoint_reset) = first_dirty(offsets);
    let active_base = segments
        .last()
        .map_or(offsets.log_end_offset, |segment| segment.base_offset);
    let dirty = non_active_from(segments, first_dirty_offset);
    let min_lag_ms = config.min_compaction_lag_ms.max(0);
    let too_young = (min_lag_ms > 0)
        .then(|| {
            dirty
                .iter()
                .find(|segment| segment.max_timestamp_ms > now_ms.saturating_sub(min_lag_ms))
                .map(|segment| segment.base_offset)
        })
        .flatten();
    let first_uncleanable = [Some(upper_bound), Some(active_base), too_young]
        .into_iter()
        .flatten()
        .min()
        .unwrap_or(active_base)
        .max(first_dirty_offset);
    let clean_bytes: u64 = segments
        .iter()
        .take_while(|segment| segment.base_offset < first_dirty_offset)
        .map(|segment| segment.size_bytes)
        .sum();
    let cleanable_bytes = if first_uncleanable > first_dirty_offset {
        bytes_between(
            segments,
            first_dirty_offset.max(offsets.log_start_offset),
            first_uncleanable,
        )
    } else {
        0
    };
    let total = clean_bytes + cleanable_bytes;
    let dirty_ratio = if total == 0 {
        0.0
    } else {
        cleanable_bytes as f64 / total as f64
    };
    CleanPlan {
        first_dirty_offset,
        first_uncleanable_offset: first_uncleanable,
        clean_bytes,
        cleanable_bytes,
        dirty_ratio,
        min_cleanable_ratio: config.min_cleanable_dirty_ratio.get(),
        compaction_delay_ms: compaction_delay(dirty, now_ms, config.max_compaction_lag_ms),
        checkpoint_reset,
        log_start_offset: offsets.log_start_offset,
    }
}

/// Kafka's `maxCompactionDelay`: how long ago the oldest dirty segment's first batch passed
/// `max_compaction_lag_ms` (timestamps ≤ 0 do not count), 0 if none did.
fn compaction_delay(dirty: &[SegmentSummary], now_ms: i64, max_lag_ms: i64) -> i64 {
    let earliest = dirty
        .iter()
        .filter_map(|segment| segment.first_batch_timestamp_ms)
        .filter(|timestamp| *timestamp > 0)
        .min();
    let clean_until = now_ms.saturating_sub(max_lag_ms.max(0));
    match earliest {
        Some(earliest) if earliest < clean_until => clean_until - earliest,
        _ => 0,
    }
}

/// Kafka's `grabFilthiestCompactedLog`: among `plans`, the index of the one with the greatest
/// dirty ratio among those due ([`CleanPlan::is_due`]); `None` if none is. Ties go to the first.
pub fn choose_filthiest(plans: &[CleanPlan]) -> Option<usize> {
    let mut best: Option<(usize, f64)> = None;
    for (index, plan) in plans.iter().enumerate() {
        if !plan.is_due() {
            continue;
        }
        if best.is_none_or(|(_, ratio)| plan.dirty_ratio > ratio) {
            best = Some((index, plan.dirty_ratio));
        }
    }
    best.map(|(index, _)| index)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{CleanupPolicy, Ratio};
    use proptest::prelude::*;

    fn segment(base_offset: i64, size_bytes: u64, max_timestamp_ms: i64) -> SegmentSummary {
        SegmentSummary {
            base_offset,
            size_bytes,
            max_timestamp_ms,
            first_batch_timestamp_ms: Some(max_timestamp_ms),
        }
    }

    fn compacted() -> LogConfig {
        LogConfig {
            cleanup_policy: CleanupPolicy::Compact,
            ..LogConfig::default()
        }
    }

    fn offsets(start: i64, end: i64, checkpoint: Option<i64>) -> LogOffsets {
        LogOffsets {
            log_start_offset: start,
            log_end_offset: end,
            checkpointed_first_dirty: checkpoint,
        }
    }

    /// Four segments of 100 offsets and 1000 bytes, timestamps 1000 apart; the last is active.
    fn four() -> Vec<SegmentSummary> {
        (0..4)
            .map(|index| segment(index * 100, 1000, 1000 * (index + 1)))
            .collect()
    }

    #[test]
    fn the_active_segment_and_the_upper_bound_are_never_cleaned() {
        let plan = plan(
            &four(),
            &offsets(0, 350, None),
            i64::MAX,
            10_000,
            &compacted(),
        );
        assert_eq!(
            (plan.first_dirty_offset, plan.first_uncleanable_offset),
            (0, 300)
        );
        assert_eq!((plan.clean_bytes, plan.cleanable_bytes), (0, 3000));
        assert_eq!(plan.dirty_ratio, 1.0);
        assert!(plan.is_due());
        let bounded = super::plan(&four(), &offsets(0, 350, None), 150, 10_000, &compacted());
        assert_eq!(bounded.first_uncleanable_offset, 150);
        assert_eq!(
            bounded.cleanable_bytes, 2000,
            "segments overlapping [0, 150)"
        );
    }

    #[test]
    fn the_checkpoint_splits_clean_from_dirty_and_a_stale_one_resets_to_the_start() {
        let plan = plan(
            &four(),
            &offsets(0, 350, Some(200)),
            i64::MAX,
            0,
            &compacted(),
        );
        assert_eq!((plan.clean_bytes, plan.cleanable_bytes), (2000, 1000));
        assert!((plan.dirty_ratio - 1.0 / 3.0).abs() < 1e-9);
        assert!(!plan.is_due(), "1/3 is below the default 0.5");
        assert!(!plan.checkpoint_reset);
        for stale in [-1, 351] {
            let reset = super::plan(
                &four(),
                &offsets(0, 350, Some(stale)),
                i64::MAX,
                0,
                &compacted(),
            );
            assert_eq!(reset.first_dirty_offset, 0);
            assert!(reset.checkpoint_reset);
        }
        let started = super::plan(
            &four(),
            &offsets(120, 350, Some(50)),
            i64::MAX,
            0,
            &compacted(),
        );
        assert_eq!(started.first_dirty_offset, 120);
    }

    #[test]
    fn min_compaction_lag_holds_back_young_segments() {
        let config = LogConfig {
            min_compaction_lag_ms: 2_500,
            ..compacted()
        };
        // now − lag = 1500: the segment at 100 (newest timestamp 2000) is too young.
        let plan = plan(&four(), &offsets(0, 350, None), i64::MAX, 4_000, &config);
        assert_eq!(plan.first_uncleanable_offset, 100);
        assert_eq!(plan.cleanable_bytes, 1000);
    }

    #[test]
    fn max_compaction_lag_forces_a_cleaning_below_the_ratio() {
        let config = LogConfig {
            max_compaction_lag_ms: 5_000,
            min_cleanable_dirty_ratio: Ratio::new(0.9).unwrap(),
            ..compacted()
        };
        let plan = plan(
            &four(),
            &offsets(0, 350, Some(200)),
            i64::MAX,
            10_000,
            &config,
        );
        // The dirty non-active segment at 200 has first batch 3000; clean until 5000.
        assert_eq!(plan.compaction_delay_ms, 2_000);
        assert!(plan.forced() && plan.is_due());
        let early = super::plan(
            &four(),
            &offsets(0, 350, Some(200)),
            i64::MAX,
            7_000,
            &config,
        );
        assert_eq!(early.compaction_delay_ms, 0);
        assert!(!early.is_due());
    }

    #[test]
    fn the_chooser_takes_the_dirtiest_due_log() {
        let config = compacted();
        let plans = [
            plan(&four(), &offsets(0, 350, Some(200)), i64::MAX, 0, &config),
            plan(&four(), &offsets(0, 350, Some(100)), i64::MAX, 0, &config),
            plan(&four(), &offsets(0, 350, None), i64::MAX, 0, &config),
        ];
        assert_eq!(choose_filthiest(&plans), Some(2));
        assert_eq!(choose_filthiest(&plans[..1]), None);
        assert_eq!(choose_filthiest(&[]), None);
    }

    proptest! {
        /// Whatever the inputs, the range lies within the log's non-active part and below the
        /// bound (or is empty at the first dirty offset), and the ratio is a ratio.
        #[test]
        fn the_cleanable_range_respects_every_bound(
            sizes in proptest::collection::vec((1u64..5000, 1i64..200, 0i64..10_000), 1..12),
            start_pick in 0usize..12,
            checkpoint in proptest::option::of(-10i64..3000),
            upper_bound in 0i64..3000,
            now_ms in 0i64..20_000,
            min_lag in 0i64..5000,
        ) {
            let mut base = 0;
            let segments: Vec<SegmentSummary> = sizes
                .iter()
                .map(|(size, span, timestamp)| {
                    let summary = segment(base, *size, *timestamp);
                    base += span;
                    summary
                })
                .collect();
            let log_end = base;
            let start = segments[start_pick % segments.len()].base_offset;
            let config = LogConfig { min_compaction_lag_ms: min_lag, ..compacted() };
            let plan = plan(&segments, &offsets(start, log_end, checkpoint), upper_bound, now_ms, &config);
            let active = segments.last().unwrap().base_offset;
            prop_assert!(plan.first_dirty_offset >= start && plan.first_dirty_offset <= log_end);
            prop_assert!(plan.first_uncleanable_offset >= plan.first_dirty_offset);
            if plan.first_uncleanable_offset > plan.first_dirty_offset {
                prop_assert!(plan.first_uncleanable_offset <= active);
                prop_assert!(plan.first_uncleanable_offset <= upper_bound);
            } else {
                prop_assert_eq!(plan.cleanable_bytes, 0);
            }
            prop_assert!((0.0..=1.0).contains(&plan.dirty_ratio));
        }
    }
}
