//! The log cleaner's threads (Kafka's `LogCleaner` and the scheduling half of its
//! `LogCleanerManager`): `log.cleaner.threads` OS threads, each with its own key map (its share of
//! `log.cleaner.dedupe.buffer.size`) and I/O buffers, repeatedly take the filthiest compacted log
//! of this broker that no other thread is cleaning, clean it (storage's `Log::clean`), log Kafka's
//! lines about it and keep Kafka's cleaner figures for `/metrics`; with nothing to clean a thread
//! sleeps `log.cleaner.backoff.ms`. Every replica cleans its own log, leader or follower, as in
//! Kafka; the bound it may clean up to is the least of the partition's high watermark (records
//! above it may still be truncated away) and its last stable offset (an open transaction's
//! records may still abort); storage applies the transaction rules below it. A log whose
//! cleaning fails is marked uncleanable, counted, and left serving. The threads share one I/O
//! throttle (`log.cleaner.io.max.bytes.per.second`); it and `log.cleaner.backoff.ms` are dynamic
//! broker configs, followed live (`crate::dynamic`).
//!
//! Must never: clean past a partition's high watermark or last stable offset, run two cleanings
//! of one log at once, stop the broker or other logs' cleaning over one log's failure, or outlive
//! the broker's shutdown (each pass is asked to stop and the threads are joined before the logs
//! close).

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use skiff_storage::{
    choose_filthiest, throttle_pause, CleanError, CleanHooks, CleanPlan, CleanStats, Cleaner,
};

use crate::context::Ctx;
use crate::metrics::{rounded_gauge, Exposition, Metrics, MetricsSection};
use crate::partition::topics::Partition;

/// How often a sleeping thread looks at the stop flag, so a shutdown waits at most this long for
/// a thread in its backoff.
const STOP_CHECK_INTERVAL: Duration = Duration::from_millis(100);
/// The throttle's window (Kafka's `Throttler` checks every 300 ms): bytes are summed over it and
/// a thread pauses when the window's rate is above the limit.
const THROTTLE_WINDOW: Duration = Duration::from_millis(300);
/// 2^20: Kafka's cleaner log lines count megabytes in mebibytes.
const MB: f64 = 1024.0 * 1024.0;

/// A log is named by its topic and partition.
type LogName = (String, i32);

/// What the threads share: which logs are being cleaned or cannot be, the throttle, the figures.
#[derive(Debug)]
pub(crate) struct CleanerShared {
    stop: AtomicBool,
    in_progress: Mutex<BTreeSet<LogName>>,
    uncleanable: Mutex<BTreeSet<LogName>>,
    throttle: Mutex<ThrottleWindow>,
    /// `log.cleaner.io.max.bytes.per.second` as f64 bits, and `log.cleaner.backoff.ms`: dynamic
    /// broker configs (`crate::dynamic`), read at each use.
    bytes_per_second: AtomicU64,
    backoff_ms: AtomicU64,
    figures: CleanerFigures,
}

#[derive(Debug)]
struct ThrottleWindow {
    start: Instant,
    bytes: u64,
}

/// Kafka's cleaner metrics: the last selection's and each thread's last cleaning's.
#[derive(Debug, Default)]
struct CleanerFigures {
    /// `max-dirty-percent` of the last selection, in percent.
    max_dirty_percent: AtomicI64,
    /// `max-compaction-delay-secs` of the last selection.
    max_compaction_delay_secs: AtomicI64,
    /// Per thread: the last cleaning's recopy percent, time in ms and map utilization percent.
    threads: Vec<ThreadFigures>,
    cleanings: AtomicU64,
    bytes_read: AtomicU64,
    bytes_written: AtomicU64,
    aborted: AtomicU64,
}

#[derive(Debug, Default)]
struct ThreadFigures {
    recopy_percent: AtomicI64,
    clean_time_ms: AtomicI64,
    buffer_utilization_percent: AtomicI64,
}

/// The running threads, joined at shutdown.
pub(crate) struct CleanerThreads {
    shared: Arc<CleanerShared>,
    handles: Vec<std::thread::JoinHandle<()>>,
}

impl CleanerThreads {
    /// Asks every pass to stop and waits for the threads (blocking: call it on a blocking thread).
    pub(crate) fn stop_and_join(self) {
        self.shared.stop.store(true, Ordering::Release);
        for handle in self.handles {
            if handle.join().is_err() {
                tracing::error!("a log cleaner thread panicked");
            }
        }
    }
}

/// Why the cleaner threads could not start (the broker stops with it: a compacted topic must not
/// go uncleaned).
#[derive(Debug, thiserror::Error)]
pub enum CleanerStartError {
    /// A thread's key map or buffers were refused.
    #[error("log cleaner memory: {0}")]
    Memory(#[from] skiff_storage::Error),
    /// The OS did not start a thread.
    #[error("log cleaner thread: {0}")]
    Thread(#[from] std::io::Error),
}

/// Starts `log.cleaner.threads` cleaner threads (unless `log.cleaner.enable` is false, which the
/// start allows only with no compacted topic) and registers their figures on `/metrics`. Each
/// thread's key map and buffers are allocated here, so a bad size stops the start.
pub(crate) fn start(
    ctx: &Arc<Ctx>,
    metrics: &Metrics,
) -> Result<CleanerThreads, CleanerStartError> {
    let config = &ctx.config;
    let threads = if config.log_cleaner_enable {
        config.log_cleaner_threads
    } else {
        0
    };
    let shared = Arc::new(CleanerShared {
        stop: AtomicBool::new(false),
        in_progress: Mutex::default(),
        uncleanable: Mutex::default(),
        throttle: Mutex::new(ThrottleWindow {
            start: Instant::now(),
            bytes: 0,
        }),
        bytes_per_second: AtomicU64::new(
            config.log_cleaner_io_max_bytes_per_second.get().to_bits(),
        ),
        backoff_ms: AtomicU64::new(config.log_cleaner_backoff_ms),
        figures: CleanerFigures {
            threads: (0..threads).map(|_| ThreadFigures::default()).collect(),
            ..CleanerFigures::default()
        },
    });
    metrics.register(Arc::new(CleanerMetrics(shared.clone())));
    tokio::spawn(follow_dynamic(
        shared.clone(),
        ctx.dynamic.subscribe(),
        ctx.shutdown.subscribe(),
    ));
    // Kafka caps each thread's share too; storage refuses a larger map.
    let map_bytes = usize::try_from(config.log_cleaner_dedupe_buffer_size / threads.max(1) as u64)
        .unwrap_or(usize::MAX)
        .min(skiff_storage::OFFSET_MAP_BYTES_MAX);
    let mut handles = Vec::with_capacity(threads);
    for id in 0..threads {
        let cleaner = Cleaner::new(
            map_bytes,
            config.log_cleaner_io_buffer_load_factor.get(),
            config.log_cleaner_io_buffer_size,
        )?;
        let (ctx, shared) = (ctx.clone(), shared.clone());
        let handle = std::thread::Builder::new()
            .name(format!("log-cleaner-{id}"))
            .spawn(move || run_thread(&ctx, &shared, id, cleaner))?;
        handles.push(handle);
    }
    Ok(CleanerThreads { shared, handles })
}

/// One thread: clean the filthiest log, or sleep the backoff, until the stop flag.
fn run_thread(ctx: &Ctx, shared: &CleanerShared, id: usize, mut cleaner: Cleaner) {
    while !shared.stopping() {
        if !clean_filthiest(ctx, shared, &mut cleaner, id) {
            shared.sleep(Duration::from_millis(
                shared.backoff_ms.load(Ordering::Relaxed),
            ));
        }
    }
}

/// Follows the dynamic `log.cleaner.io.max.bytes.per.second` and `log.cleaner.backoff.ms` until
/// shutdown (Kafka changes them live too; the thread count and buffer sizes need a restart here).
async fn follow_dynamic(
    shared: Arc<CleanerShared>,
    mut configs: tokio::sync::watch::Receiver<Arc<crate::config::Config>>,
    mut shutdown: tokio::sync::watch::Receiver<bool>,
) {
    loop {
        {
            let config = configs.borrow_and_update();
            let rate = config.log_cleaner_io_max_bytes_per_second.get();
            shared
                .bytes_per_second
                .store(rate.to_bits(), Ordering::Relaxed);
            shared
                .backoff_ms
                .store(config.log_cleaner_backoff_ms, Ordering::Relaxed);
        }
        tokio::select! {
            changed = configs.changed() => if changed.is_err() { return },
            _ = shutdown.changed() => return,
        }
    }
}

impl CleanerShared {
    fn stopping(&self) -> bool {
        self.stop.load(Ordering::Acquire)
    }

    /// Sleeps `length`, waking early for a stop.
    fn sleep(&self, length: Duration) {
        let until = Instant::now() + length;
        while !self.stopping() {
            let left = until.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return;
            }
            std::thread::sleep(left.min(STOP_CHECK_INTERVAL));
        }
    }

    fn uncleanable(&self) -> std::sync::MutexGuard<'_, BTreeSet<LogName>> {
        self.uncleanable
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn in_progress(&self) -> std::sync::MutexGuard<'_, BTreeSet<LogName>> {
        self.in_progress
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

/// A log that may be cleaned now, with its plan.
struct Candidate {
    name: LogName,
    partition: Arc<Partition>,
    plan: CleanPlan,
}

/// Cleans the filthiest due log no thread is cleaning; whether there was one.
fn clean_filthiest(ctx: &Ctx, shared: &CleanerShared, cleaner: &mut Cleaner, id: usize) -> bool {
    let now_ms = ctx.now_ms();
    let candidates = {
        // Chosen and claimed under the in-progress lock, so two threads never take one log.
        let mut in_progress = shared.in_progress();
        let candidates = candidates(ctx, shared, &in_progress, now_ms);
        let chosen = choose_filthiest(&candidates.iter().map(|c| c.plan).collect::<Vec<_>>());
        match chosen {
            None => return false,
            Some(index) => {
                let chosen = candidates.into_iter().nth(index);
                if let Some(chosen) = &chosen {
                    in_progress.insert(chosen.name.clone());
                }
                chosen
            }
        }
    };
    let Some(candidate) = candidates else {
        return false;
    };
    clean_one(shared, cleaner, id, &candidate, now_ms);
    shared.in_progress().remove(&candidate.name);
    true
}

/// Every compacted log of this broker with a plan, except those being cleaned or uncleanable;
/// records the selection's figures (the dirtiest ratio and the longest compaction delay).
fn candidates(
    ctx: &Ctx,
    shared: &CleanerShared,
    in_progress: &BTreeSet<LogName>,
    now_ms: i64,
) -> Vec<Candidate> {
    let uncleanable = shared.uncleanable().clone();
    let mut found = Vec::new();
    let (mut max_dirty, mut max_delay_ms) = (0.0f64, 0i64);
    for topic in ctx.topics.all() {
        if !topic.config.cleanup_policy.compact {
            continue;
        }
        for partition in &topic.partitions {
            let name = (topic.name.clone(), partition.index());
            let log = partition.log();
            if in_progress.contains(&name) || uncleanable.contains(&name) || log.is_recovering() {
                continue;
            }
            // Kafka's firstUncleanableOffset: never past the high watermark (a leader change may
            // still truncate above it) nor the first unstable offset (an open transaction's
            // records may still abort).
            let bound = partition
                .high_watermark()
                .min(partition.last_stable_offset());
            match log.cleaning_plan(bound, now_ms) {
                Ok(Some(plan)) => {
                    max_dirty = max_dirty.max(plan.dirty_ratio);
                    max_delay_ms = max_delay_ms.max(plan.compaction_delay_ms);
                    found.push(Candidate {
                        name,
                        partition: partition.clone(),
                        plan,
                    });
                }
                Ok(None) => {}
                Err(error) => {
                    tracing::warn!(topic = %topic.name, partition = partition.index(), %error, "log cleaner cannot plan a cleaning")
                }
            }
        }
    }
    let figures = &shared.figures;
    figures
        .max_dirty_percent
        .store(rounded_gauge(max_dirty * 100.0), Ordering::Relaxed);
    figures
        .max_compaction_delay_secs
        .store(max_delay_ms / 1000, Ordering::Relaxed);
    found
}

/// The hooks of one pass: the shared throttle, and the stop flag.
struct PassHooks<'a> {
    shared: &'a CleanerShared,
}

impl CleanHooks for PassHooks<'_> {
    fn on_io(&mut self, bytes: u64) {
        let pause = {
            let mut window = self
                .shared
                .throttle
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner());
            window.bytes = window.bytes.saturating_add(bytes);
            let elapsed = window.start.elapsed();
            if elapsed < THROTTLE_WINDOW {
                return;
            }
            let pause = throttle_pause(
                window.bytes,
                elapsed,
                f64::from_bits(self.shared.bytes_per_second.load(Ordering::Relaxed)),
            );
            // The next window starts after the pause, which every thread's bytes share.
            window.start = Instant::now() + pause;
            window.bytes = 0;
            pause
        };
        if !pause.is_zero() {
            self.shared.sleep(pause);
        }
    }

    fn keep_going(&mut self) -> bool {
        !self.shared.stopping()
    }
}

/// Cleans one log: the pass, then Kafka's log lines and the figures, or the failure's marking.
fn clean_one(
    shared: &CleanerShared,
    cleaner: &mut Cleaner,
    id: usize,
    candidate: &Candidate,
    now_ms: i64,
) {
    let (topic, index) = &candidate.name;
    let live_producers = candidate.partition.live_producer_batches();
    let started = Instant::now();
    let mut hooks = PassHooks { shared };
    let outcome = candidate.partition.log().clean(
        &candidate.plan,
        cleaner,
        &live_producers,
        &mut hooks,
        now_ms,
    );
    let elapsed = started.elapsed();
    match outcome {
        Ok(stats) => {
            record(shared, id, &stats, elapsed);
            log_cleaning(id, topic, *index, &stats, elapsed);
        }
        Err(CleanError::Aborted(why)) => {
            shared.figures.aborted.fetch_add(1, Ordering::Relaxed);
            tracing::info!(thread = id, topic = %topic, partition = index, why, "log cleaning aborted; retried later");
        }
        Err(CleanError::Failed(error)) => {
            shared.uncleanable().insert(candidate.name.clone());
            tracing::error!(thread = id, topic = %topic, partition = index, %error, "unexpected error cleaning log; marking its partition uncleanable (it keeps serving; a restart clears the mark)");
        }
    }
}

/// Keeps the thread's last figures and adds the pass to the totals.
fn record(shared: &CleanerShared, id: usize, stats: &CleanStats, elapsed: Duration) {
    let figures = &shared.figures;
    figures.cleanings.fetch_add(1, Ordering::Relaxed);
    figures
        .bytes_read
        .fetch_add(stats.bytes_read, Ordering::Relaxed);
    figures
        .bytes_written
        .fetch_add(stats.bytes_written, Ordering::Relaxed);
    if let Some(thread) = figures.threads.get(id) {
        let recopy = if stats.bytes_read == 0 {
            0.0
        } else {
            100.0 * stats.bytes_written as f64 / stats.bytes_read as f64
        };
        thread
            .recopy_percent
            .store(rounded_gauge(recopy), Ordering::Relaxed);
        thread.clean_time_ms.store(
            i64::try_from(elapsed.as_millis()).unwrap_or(i64::MAX),
            Ordering::Relaxed,
        );
        thread.buffer_utilization_percent.store(
            rounded_gauge(stats.map_utilization * 100.0),
            Ordering::Relaxed,
        );
    }
}

/// Kafka's lines about one cleaning (`LogCleaner.recordStats`), MB being 2^20 bytes, so the
/// figures compare with a Kafka broker's log.
fn log_cleaning(id: usize, topic: &str, partition: i32, stats: &CleanStats, elapsed: Duration) {
    let seconds = elapsed.as_secs_f64().max(1e-9);
    let (read_mb, written_mb) = (
        stats.bytes_read as f64 / MB,
        stats.bytes_written as f64 / MB,
    );
    let reduction = if stats.bytes_read == 0 {
        0.0
    } else {
        100.0 * (1.0 - stats.bytes_written as f64 / stats.bytes_read as f64)
    };
    let fewer = if stats.records_read == 0 {
        0.0
    } else {
        100.0 * (1.0 - stats.records_written as f64 / stats.records_read as f64)
    };
    tracing::info!(
        "Log cleaner thread {id} cleaned log {topic}-{partition} (dirty section = [{}, {}])\n\
         \t{read_mb:.1} MB of log processed in {seconds:.1} seconds ({:.1} MB/sec).\n\
         \tIndexed {:.1} MB ({} messages).\n\
         \tBuffer utilization: {:.1}%\n\
         \tStart size: {read_mb:.1} MB ({} messages)\n\
         \tEnd size: {written_mb:.1} MB ({} messages)\n\
         \t{reduction:.1}% size reduction ({fewer:.1}% fewer messages)",
        stats.first_dirty_offset,
        stats.end_offset,
        read_mb / seconds,
        stats.map_bytes_read as f64 / MB,
        stats.map_records_read,
        stats.map_utilization * 100.0,
        stats.records_read,
        stats.records_written,
    );
}

/// The cleaner's section of `/metrics`.
struct CleanerMetrics(Arc<CleanerShared>);

impl MetricsSection for CleanerMetrics {
    fn render(&self, out: &mut Exposition) {
        let shared = &self.0;
        let figures = &shared.figures;
        let max_of =
            |read: fn(&ThreadFigures) -> i64| figures.threads.iter().map(read).max().unwrap_or(0);
        out.gauge(
            "skiff_log_cleaner_max_dirty_percent",
            "Kafka's max-dirty-percent: the highest dirty ratio among this broker's compacted logs at the last selection, in percent.",
            figures.max_dirty_percent.load(Ordering::Relaxed),
        );
        out.gauge(
            "skiff_log_cleaner_recopy_percent",
            "Kafka's cleaner-recopy-percent: bytes written over bytes read by the last cleaning, in percent (the highest over the threads).",
            max_of(|t| t.recopy_percent.load(Ordering::Relaxed)),
        );
        out.gauge(
            "skiff_log_cleaner_max_clean_time_secs",
            "Kafka's max-clean-time-secs: the longest last cleaning among the threads, in seconds.",
            max_of(|t| t.clean_time_ms.load(Ordering::Relaxed)) / 1000,
        );
        out.gauge(
            "skiff_log_cleaner_max_compaction_delay_secs",
            "Kafka's max-compaction-delay-secs: how far past max.compaction.lag.ms the most overdue log was at the last selection, in seconds.",
            figures.max_compaction_delay_secs.load(Ordering::Relaxed),
        );
        out.gauge(
            "skiff_log_cleaner_max_buffer_utilization_percent",
            "Kafka's max-buffer-utilization-percent: the fullest key map of the threads' last cleanings, in percent.",
            max_of(|t| t.buffer_utilization_percent.load(Ordering::Relaxed)),
        );
        out.gauge(
            "skiff_log_cleaner_uncleanable_partitions_count",
            "Kafka's uncleanable-partitions-count: logs whose cleaning failed; they keep serving uncleaned until a restart.",
            i64::try_from(shared.uncleanable().len()).unwrap_or(i64::MAX),
        );
        out.counter(
            "skiff_log_cleaner_cleanings_total",
            "Cleanings completed.",
            figures.cleanings.load(Ordering::Relaxed),
        );
        out.counter(
            "skiff_log_cleaner_aborted_total",
            "Cleanings aborted by a truncation, a moved log start, a deletion or a shutdown (retried later).",
            figures.aborted.load(Ordering::Relaxed),
        );
        out.counter(
            "skiff_log_cleaner_read_bytes_total",
            "Bytes the cleaners read recopying segments.",
            figures.bytes_read.load(Ordering::Relaxed),
        );
        out.counter(
            "skiff_log_cleaner_written_bytes_total",
            "Bytes the cleaners wrote to cleaned segments.",
            figures.bytes_written.load(Ordering::Relaxed),
        );
    }
}
