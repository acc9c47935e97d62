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
//! throttle (`log.cleaner.io.max.bytes.per.second`). All six keys are dynamic broker configs
//! (`crate::dynamic`): the throttle and `log.cleaner.backoff.ms` apply at their next use; a new
//! thread count, dedupe buffer, I/O buffer size or load factor restarts the threads, as Kafka's
//! `LogCleaner.reconfigure` does (a pass in progress aborts and its log is cleaned again later),
//! and a thread count may change at most to double or half the current one, as in Kafka
//! (`crate::dynamic::check_cleaner_threads_change`).
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

use crate::config::Config;
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
    /// Bumped by each restart: threads of an older generation stop.
    generation: AtomicU64,
    /// Threads of the current generation (`/metrics`: shows a live thread-count change).
    running_threads: AtomicU64,
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

impl ThreadFigures {
    /// A thread that no longer runs has no last cleaning.
    fn reset(&self) {
        self.recopy_percent.store(0, Ordering::Relaxed);
        self.clean_time_ms.store(0, Ordering::Relaxed);
        self.buffer_utilization_percent.store(0, Ordering::Relaxed);
    }
}

/// Figures are kept for the most threads `log.cleaner.threads` allows, so a restart with more
/// threads needs no new ones.
// INVARIANT: the config's bound is a small positive constant.
#[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
const THREAD_FIGURES: usize = crate::config::LOG_CLEANER_THREADS_MAX as usize;

/// The running threads, joined at shutdown.
pub(crate) struct CleanerThreads {
    shared: Arc<CleanerShared>,
    pool: Arc<Mutex<Pool>>,
}

/// The threads of one generation and the sizes they were made with.
struct Pool {
    sizes: CleanerSizes,
    handles: Vec<std::thread::JoinHandle<()>>,
}

/// What the threads are made with: Kafka restarts its cleaner threads when one of these changes
/// (`log.cleaner.threads`, `log.cleaner.dedupe.buffer.size`, `log.cleaner.io.buffer.size`,
/// `log.cleaner.io.buffer.load.factor`), and so does [`follow_dynamic`].
#[derive(Clone, Copy, Debug, PartialEq)]
struct CleanerSizes {
    threads: usize,
    dedupe_buffer_bytes: u64,
    io_buffer_bytes: usize,
    load_factor: f64,
}

impl CleanerSizes {
    fn of(config: &Config) -> Self {
        Self {
            threads: if config.log_cleaner_enable {
                config.log_cleaner_threads
            } else {
                0
            },
            dedupe_buffer_bytes: config.log_cleaner_dedupe_buffer_size,
            io_buffer_bytes: config.log_cleaner_io_buffer_size,
            load_factor: config.log_cleaner_io_buffer_load_factor.get(),
        }
    }

    /// Each thread's key map: its share of the dedupe buffer (Kafka caps each share too;
    /// storage refuses a larger map).
    fn map_bytes(&self) -> usize {
        usize::try_from(self.dedupe_buffer_bytes / self.threads.max(1) as u64)
            .unwrap_or(usize::MAX)
            .min(skiff_storage::OFFSET_MAP_BYTES_MAX)
    }
}

impl CleanerThreads {
    /// Asks every pass to stop and waits for the threads (blocking: call it on a blocking thread).
    pub(crate) fn stop_and_join(self) {
        self.shared.stop.store(true, Ordering::Release);
        let handles = std::mem::take(&mut lock(&self.pool).handles);
        join(handles);
    }
}

fn lock(pool: &Mutex<Pool>) -> std::sync::MutexGuard<'_, Pool> {
    pool.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

fn join(handles: Vec<std::thread::JoinHandle<()>>) {
    for handle in handles {
        if handle.join().is_err() {
            tracing::error!("a log cleaner thread panicked");
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
    let config = ctx.dynamic.effective();
    let sizes = CleanerSizes::of(&config);
    let shared = Arc::new(CleanerShared {
        stop: AtomicBool::new(false),
        generation: AtomicU64::new(0),
        running_threads: AtomicU64::new(0),
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
            threads: (0..THREAD_FIGURES)
                .map(|_| ThreadFigures::default())
                .collect(),
            ..CleanerFigures::default()
        },
    });
    metrics.register(Arc::new(CleanerMetrics(shared.clone())));
    let handles = spawn_threads(ctx, &shared, sizes)?;
    let pool = Arc::new(Mutex::new(Pool { sizes, handles }));
    tokio::spawn(follow_dynamic(
        ctx.clone(),
        shared.clone(),
        pool.clone(),
        ctx.dynamic.subscribe(),
    ));
    Ok(CleanerThreads { shared, pool })
}

/// The threads of the current generation, each with its key map and buffers of `sizes`
/// (allocated before any thread starts, so a refused size starts none).
fn spawn_threads(
    ctx: &Arc<Ctx>,
    shared: &Arc<CleanerShared>,
    sizes: CleanerSizes,
) -> Result<Vec<std::thread::JoinHandle<()>>, CleanerStartError> {
    let cleaners = (0..sizes.threads)
        .map(|_| Cleaner::new(sizes.map_bytes(), sizes.load_factor, sizes.io_buffer_bytes))
        .collect::<Result<Vec<_>, _>>()?;
    let generation = shared.generation.load(Ordering::Acquire);
    let mut handles = Vec::with_capacity(cleaners.len());
    for (id, cleaner) in cleaners.into_iter().enumerate() {
        let (ctx, shared) = (ctx.clone(), shared.clone());
        let handle = std::thread::Builder::new()
            .name(format!("log-cleaner-{id}"))
            .spawn(move || run_thread(&ctx, &shared, id, generation, cleaner))?;
        handles.push(handle);
    }
    shared
        .running_threads
        .store(handles.len() as u64, Ordering::Relaxed);
    Ok(handles)
}

/// Replaces the threads with ones of `sizes` (blocking: the old ones finish or abort their pass
/// first; an aborted cleaning is taken up again later). Sizes the storage refuses leave the
/// threads as they were.
fn restart(ctx: &Arc<Ctx>, shared: &Arc<CleanerShared>, pool: &Mutex<Pool>, sizes: CleanerSizes) {
    let mut pool = lock(pool);
    if shared.stopping() || pool.sizes == sizes {
        return;
    }
    shared.generation.fetch_add(1, Ordering::AcqRel);
    join(std::mem::take(&mut pool.handles));
    for figures in shared.figures.threads.iter().skip(sizes.threads) {
        figures.reset();
    }
    match spawn_threads(ctx, shared, sizes) {
        Ok(handles) => {
            tracing::info!(
                threads = sizes.threads,
                dedupe_buffer_bytes = sizes.dedupe_buffer_bytes,
                "log cleaner threads restarted with new sizes"
            );
            *pool = Pool { sizes, handles };
        }
        Err(error) => {
            tracing::error!(%error, "log cleaner threads not restarted with new sizes; keeping the previous ones");
            match spawn_threads(ctx, shared, pool.sizes) {
                Ok(handles) => pool.handles = handles,
                Err(error) => tracing::error!(%error, "log cleaner threads could not start again"),
            }
        }
    }
}

/// One thread: clean the filthiest log, or sleep the backoff, until the stop flag or a newer
/// generation.
fn run_thread(ctx: &Ctx, shared: &CleanerShared, id: usize, generation: u64, mut cleaner: Cleaner) {
    let stop = ThreadStop { shared, generation };
    while !stop.now() {
        if !clean_filthiest(ctx, &stop, &mut cleaner, id) {
            stop.sleep(Duration::from_millis(
                shared.backoff_ms.load(Ordering::Relaxed),
            ));
        }
    }
}

/// Follows the dynamic cleaner keys until shutdown: the I/O throttle and the backoff apply at
/// their next use, the sizes restart the threads (as Kafka's `LogCleaner.reconfigure` does).
async fn follow_dynamic(
    ctx: Arc<Ctx>,
    shared: Arc<CleanerShared>,
    pool: Arc<Mutex<Pool>>,
    mut configs: tokio::sync::watch::Receiver<Arc<Config>>,
) {
    let mut shutdown = ctx.shutdown.subscribe();
    loop {
        let sizes = {
            let config = configs.borrow_and_update();
            let rate = config.log_cleaner_io_max_bytes_per_second.get();
            shared
                .bytes_per_second
                .store(rate.to_bits(), Ordering::Relaxed);
            shared
                .backoff_ms
                .store(config.log_cleaner_backoff_ms, Ordering::Relaxed);
            CleanerSizes::of(&config)
        };
        if lock(&pool).sizes != sizes {
            let (ctx, shared, pool) = (ctx.clone(), shared.clone(), pool.clone());
            let restarted =
                tokio::task::spawn_blocking(move || restart(&ctx, &shared, &pool, sizes)).await;
            if let Err(error) = restarted {
                tracing::error!(%error, "log cleaner restart failed");
            }
        }
        tokio::select! {
            changed = configs.changed() => if changed.is_err() { return },
            _ = shutdown.changed() => return,
        }
    }
}

/// When one thread stops: at shutdown, or when a restart made a newer generation.
struct ThreadStop<'a> {
    shared: &'a CleanerShared,
    generation: u64,
}

impl ThreadStop<'_> {
    fn now(&self) -> bool {
        self.shared.stopping() || self.shared.generation.load(Ordering::Acquire) != self.generation
    }

    /// Sleeps `length`, waking early to stop.
    fn sleep(&self, length: Duration) {
        let until = Instant::now() + length;
        while !self.now() {
            let left = until.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return;
            }
            std::thread::sleep(left.min(STOP_CHECK_INTERVAL));
        }
    }
}

impl CleanerShared {
    fn stopping(&self) -> bool {
        self.stop.load(Ordering::Acquire)
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
fn clean_filthiest(ctx: &Ctx, stop: &ThreadStop<'_>, cleaner: &mut Cleaner, id: usize) -> bool {
    let shared = stop.shared;
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
    clean_one(stop, cleaner, id, &candidate, now_ms);
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

/// The hooks of one pass: the shared throttle, and the thread's stop.
struct PassHooks<'a> {
    stop: &'a ThreadStop<'a>,
}

impl CleanHooks for PassHooks<'_> {
    fn on_io(&mut self, bytes: u64) {
        let pause = {
            let mut window = self
                .stop
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
                f64::from_bits(self.stop.shared.bytes_per_second.load(Ordering::Relaxed)),
            );
            // The next window starts after the pause, which every thread's bytes share.
            window.start = Instant::now() + pause;
            window.bytes = 0;
            pause
        };
        if !pause.is_zero() {
            self.stop.sleep(pause);
        }
    }

    fn keep_going(&mut self) -> bool {
        !self.stop.now()
    }
}

/// Cleans one log: the pass, then Kafka's log lines and the figures, or the failure's marking.
fn clean_one(
    stop: &ThreadStop<'_>,
    cleaner: &mut Cleaner,
    id: usize,
    candidate: &Candidate,
    now_ms: i64,
) {
    let (topic, index) = &candidate.name;
    let live_producers = candidate.partition.live_producer_batches();
    let started = Instant::now();
    let shared = stop.shared;
    let mut hooks = PassHooks { stop };
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
        out.gauge(
            "skiff_log_cleaner_threads",
            "Log cleaner threads running (log.cleaner.threads, a dynamic broker config).",
            i64::try_from(shared.running_threads.load(Ordering::Relaxed)).unwrap_or(i64::MAX),
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_follow_the_four_keys_that_restart_the_threads() {
        let base = Config::default();
        let mut next = base.clone();
        next.apply_override("log.cleaner.backoff.ms=1")
            .expect("backoff");
        assert_eq!(CleanerSizes::of(&base), CleanerSizes::of(&next));
        for key in [
            "log.cleaner.threads=2",
            "log.cleaner.dedupe.buffer.size=67108864",
            "log.cleaner.io.buffer.size=1048576",
            "log.cleaner.io.buffer.load.factor=0.5",
        ] {
            let mut next = base.clone();
            next.apply_override(key).expect(key);
            assert_ne!(CleanerSizes::of(&base), CleanerSizes::of(&next), "{key}");
        }
        let mut two_threads = base.clone();
        two_threads
            .apply_override("log.cleaner.threads=2")
            .expect("threads");
        let two = CleanerSizes::of(&two_threads);
        assert_eq!(two.map_bytes() * 2, CleanerSizes::of(&base).map_bytes());
    }
}
