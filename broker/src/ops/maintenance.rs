//! Background care of the logs: rolls segments by age, enforces retention, flushes logs whose topic
//! sets `flush.ms` even when no append comes to trigger it; every
//! `log.flush.offset.checkpoint.interval.ms` syncs the logs with unsynced data and writes the
//! directory's offset checkpoint (Kafka's recovery-point and log-start-offset checkpoints), which
//! bounds what a restart after a crash rescans, leaves a clean shutdown only what came since to
//! sync, and is where the log starts retention and DeleteRecords moved become durable (they are
//! not written when they move); samples this node's load and traffic every 5 s and publishes them
//! to `R/load/<id>` for placement and the shedder. Runs blocking file work on the blocking pool
//! so no request waits behind it.
//!
//! Must never: read the clock anywhere but its tick (storage gets `now_ms` as an argument), or stop
//! on one log's error (it logs it and goes on with the others).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;

use skiff_cluster::traffic::TrafficReading;

use crate::context::Ctx;

/// The shortest tick, so a tiny `flush.ms` cannot turn this task into a busy loop.
const TICK_MS_MIN: u64 = 100;
/// How often this node's load (CPU, disk IO, write rate, free disk, traffic) is sampled for
/// placement and the shedder: as often as a load report may be written, so a change in traffic
/// reaches the controller within one or two report intervals.
const LOAD_SAMPLE_INTERVAL_MS: u64 = skiff_cluster::load::LOAD_REPORT_INTERVAL_MS_MIN;

/// Runs until `stop` turns true.
pub(crate) async fn run(ctx: Arc<Ctx>, mut stop: watch::Receiver<bool>) {
    let check_interval_ms = ctx.config.log_retention_check_interval_ms.max(TICK_MS_MIN);
    let checkpoint_interval_ms = ctx
        .config
        .log_flush_offset_checkpoint_interval_ms
        .max(TICK_MS_MIN);
    let mut since_check_ms = 0u64;
    let mut since_checkpoint_ms = 0u64;
    let mut since_sample_ms = 0u64;
    // Milliseconds since each `flush.ms` topic was last flushed by this task.
    let mut since_flush_ms: HashMap<String, u64> = HashMap::new();
    loop {
        let flush_interval_ms = ctx
            .topics
            .all()
            .iter()
            .map(|topic| topic.config.flush_ms)
            .min()
            .unwrap_or(u64::MAX);
        let tick_ms = check_interval_ms
            .min(flush_interval_ms)
            .min(checkpoint_interval_ms)
            .clamp(TICK_MS_MIN, LOAD_SAMPLE_INTERVAL_MS);
        tokio::select! {
            _ = stop.changed() => return,
            _ = tokio::time::sleep(Duration::from_millis(tick_ms)) => {}
        }
        since_check_ms = since_check_ms.saturating_add(tick_ms);
        let check_due = since_check_ms >= check_interval_ms;
        if check_due {
            since_check_ms = 0;
        }
        since_checkpoint_ms = since_checkpoint_ms.saturating_add(tick_ms);
        let checkpoint_due = since_checkpoint_ms >= checkpoint_interval_ms;
        if checkpoint_due {
            since_checkpoint_ms = 0;
        }
        since_sample_ms = since_sample_ms.saturating_add(tick_ms);
        let sample_due = since_sample_ms >= LOAD_SAMPLE_INTERVAL_MS;
        if sample_due {
            since_sample_ms = 0;
        }
        let mut flush_topics = Vec::new();
        for topic in ctx.topics.all() {
            if topic.config.flush_ms == u64::MAX {
                continue;
            }
            let since = since_flush_ms.entry(topic.name.clone()).or_insert(0);
            *since = since.saturating_add(tick_ms);
            if *since >= topic.config.flush_ms {
                *since = 0;
                flush_topics.push(topic.name.clone());
            }
        }
        let work_ctx = ctx.clone();
        let work = tokio::task::spawn_blocking(move || {
            let ctx = work_ctx;
            let sampled = if sample_due {
                let now_ms = u64::try_from(ctx.now_ms()).unwrap_or(0);
                let sampled = ctx
                    .placement
                    .sample_traffic(crate::clock::mono_ms(), read_traffic(&ctx));
                let mut traffic = None;
                if let Some((interval, known)) = sampled {
                    ctx.metrics.traffic.add(&interval.gained);
                    if known {
                        ctx.metrics.set_traffic_rates(&interval.record);
                        traffic = Some(interval.record);
                    }
                }
                // Placement's write rate: the record bytes this broker appended to its logs.
                let totals = ctx.metrics.traffic_totals();
                let written = totals.bytes_in.saturating_add(totals.replication_bytes_in);
                let report = ctx.placement.sample_load(now_ms, Some(written));
                // Traffic needs two readings, the smoothed figures a full window (one reading
                // more than LOAD_WINDOW_SAMPLES): the traffic goes out as soon as it is known,
                // with the figures unknown (-1) until then, which placement reads exactly as it
                // reads no report at all.
                match (report, traffic) {
                    (None, None) => None,
                    (report, traffic) => Some((
                        report.unwrap_or_else(skiff_placement::LoadReport::unknown),
                        traffic.unwrap_or_default(),
                        now_ms,
                    )),
                }
            } else {
                None
            };
            care(&ctx, check_due, &flush_topics);
            if checkpoint_due {
                // After `care`, so the recovery points its flushes advanced are written too.
                if let Err(error) = ctx.topics.checkpoint_recovery_points() {
                    tracing::error!(%error, "recovery-point checkpoint");
                }
            }
            sampled
        });
        match work.await {
            Ok(Some((report, traffic, now_ms))) => {
                ctx.cluster.publish_load(report, traffic, now_ms).await
            }
            Ok(None) => {}
            Err(error) => tracing::error!(%error, "log maintenance task failed"),
        }
    }
}

/// One reading of every local partition's traffic counters.
fn read_traffic(ctx: &Ctx) -> TrafficReading {
    let mut reading = TrafficReading::new();
    for topic in ctx.topics.all() {
        for partition in &topic.partitions {
            reading.insert(
                (topic.name.clone(), partition.index()),
                partition.traffic().read(),
            );
        }
    }
    reading
}

fn care(ctx: &Ctx, check_due: bool, flush_topics: &[String]) {
    let now_ms = ctx.now_ms();
    for topic in ctx.topics.all() {
        let flush_due = flush_topics.contains(&topic.name);
        for partition in &topic.partitions {
            let log = partition.log();
            if log.is_recovering() {
                // Nothing to roll, retain or flush before the log is recovered (after a crash).
                continue;
            }
            if check_due {
                if let Err(error) = log.roll_if_needed(now_ms) {
                    tracing::warn!(topic = %topic.name, partition = partition.index(), %error, "roll");
                }
                // A log whose cleanup.policy lacks delete (__consumer_offsets among them, whose
                // groups may not commit again for weeks) has no retention: storage keeps it
                // whole and the cleaner (`ops::cleaner`) compacts it.
                match log.enforce_retention(now_ms) {
                    Ok(0) => {}
                    Ok(deleted) => {
                        tracing::info!(topic = %topic.name, partition = partition.index(), deleted, "retention deleted segments")
                    }
                    Err(error) => {
                        tracing::warn!(topic = %topic.name, partition = partition.index(), %error, "retention")
                    }
                }
            }
            // A topic with `flush.ms` fsyncs here every `flush.ms` even without appends. Every
            // other sync (and the bound on what a crash makes recovery rescan) is the periodic
            // offset checkpoint's, whatever the log's `PersistMode`: a flush of every log at each
            // retention check too would only sync again what the checkpoint syncs.
            if flush_due {
                if let Err(error) = log.flush() {
                    tracing::error!(topic = %topic.name, partition = partition.index(), %error, "flush");
                }
            }
        }
    }
}
