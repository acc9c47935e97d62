//! The last stable offset as the partition publishes it: held at an open transaction's first
//! offset, released only once the high watermark passes the marker that ended it, woken like the
//! high watermark, and rebuilt when the log is reopened.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Waker};

use skiff_cluster::records::{PartitionState, Writer};
use skiff_cluster::replica::{Acks, FollowerFetch, ReplicaConfig};
use skiff_protocol::records::record::{BatchBuilder, NewRecord};
use skiff_protocol::records::txn::{EndTxnMarker, MarkerType};
use skiff_protocol::records::Compression;
use skiff_storage::{LogConfig, LogDir};

use super::txn::MarkerAppend;
use super::*;
use crate::partition::replica::proposal_channel;

/// Partition 0 of `t` led by broker 1 with follower 2 in the ISR, over the log in `dir`.
fn led_with_follower(log_dir: &LogDir) -> Partition {
    let log = match log_dir.log("t", 0).expect("listed") {
        Some(log) => log,
        None => super::create_log(log_dir, "t", 0, None).expect("log"),
    };
    let producers = replay_producers(&log).expect("replayed");
    let config = ReplicaConfig {
        min_insync_replicas: 1,
        ..ReplicaConfig::default()
    };
    let partition = Partition::new(0, log, producers, PartitionReplica::new(1, config, 0));
    let state = PartitionState {
        leader: 1,
        leader_epoch: 0,
        isr: vec![1, 2],
        replicas: vec![1, 2],
        writer: Writer::Creator,
    };
    partition.apply_state(&state, 1, &mut Vec::new());
    partition
}

/// One record from `producer_id` at `sequence`, transactional or not.
fn batch(producer_id: i64, sequence: i32, transactional: bool) -> Vec<u8> {
    let mut builder = BatchBuilder::new(0, Compression::None);
    builder.producer_id = producer_id;
    builder.producer_epoch = 0;
    builder.base_sequence = sequence;
    builder.transactional = transactional;
    builder
        .push(&NewRecord {
            offset_delta: 0,
            timestamp: 1_000,
            key: None,
            value: Some(b"v"),
            headers: &[],
        })
        .expect("fits");
    builder.build().expect("builds")
}

fn produce(partition: &Partition, mut batch: Vec<u8>) -> i64 {
    let append = LeaderAppend {
        batches: std::slice::from_mut(&mut batch),
        origin: AppendOrigin::Client,
        leader_epoch: 0,
        now_ms: 1_000,
        acks: Acks::Leader,
        timeout_ms: 0,
    };
    partition
        .append_as_leader(append, &mut Vec::new())
        .expect("appended")
        .base_offset
}

fn follower_caught_up_to(partition: &Partition, offset: i64) {
    let fetch = FollowerFetch {
        replica: 2,
        fetch_offset: offset,
        last_fetched_epoch: (offset > 0).then_some(0),
        current_leader_epoch: 0,
    };
    partition
        .answer_follower_fetch(crate::clock::mono_ms(), fetch, &mut Vec::new())
        .expect("answered");
}

fn commit(producer_id: i64, producer_epoch: i16) -> MarkerAppend {
    MarkerAppend {
        marker: EndTxnMarker {
            producer_id,
            producer_epoch,
            coordinator_epoch: 3,
            marker_type: MarkerType::Commit,
        },
        leader_epoch: 0,
        now_ms: 2_000,
        timeout_ms: 30_000,
    }
}

fn is_ready<F: Future + Unpin>(future: &mut F) -> bool {
    let mut context = Context::from_waker(Waker::noop());
    Pin::new(future).poll(&mut context).is_ready()
}

#[test]
fn the_stable_offset_waits_for_the_marker_to_be_replicated_and_wakes_the_parked_fetches() {
    let dir = tempfile::tempdir().expect("tempdir");
    let log_dir = LogDir::open(dir.path(), LogConfig::default()).expect("log dir");
    let partition = led_with_follower(&log_dir);
    assert_eq!(produce(&partition, batch(5, 0, true)), 0);
    assert_eq!(produce(&partition, batch(6, 0, false)), 1);
    follower_caught_up_to(&partition, 2);
    assert_eq!(partition.high_watermark(), 2);
    assert_eq!(partition.last_stable_offset(), 0, "5's transaction is open");

    let (sender, _queued) = proposal_channel();
    let appended = partition
        .append_marker(commit(5, 1), &sender)
        .expect("marker appended");
    assert_eq!(
        (
            appended.completed.first_offset,
            appended.completed.last_offset
        ),
        (0, 2)
    );
    let mut wait = appended.replication;
    assert!(wait.try_recv().is_err(), "acks=all: not replicated yet");
    assert_eq!(
        partition.last_stable_offset(),
        0,
        "the marker may still be lost"
    );

    let mut parked = partition.waiter();
    follower_caught_up_to(&partition, 3);
    assert_eq!(partition.high_watermark(), 3);
    assert_eq!(partition.last_stable_offset(), 3);
    assert_eq!(wait.try_recv(), Ok(None), "replicated");
    assert!(
        is_ready(&mut parked),
        "read_committed fetches may read further"
    );

    // The ended transaction's epoch is fenced; a zombie coordinator too.
    let stale = produce_error(&partition, batch(5, 1, true));
    assert_eq!(stale, ErrorCode::INVALID_PRODUCER_EPOCH.code());
    let mut zombie = commit(5, 1);
    zombie.marker.coordinator_epoch = 2;
    let refused = partition
        .append_marker(zombie, &sender)
        .err()
        .expect("a zombie coordinator is fenced");
    assert!(matches!(
        refused,
        AppendError::Producer(ProducerError::CoordinatorFenced { .. })
    ));
}

fn produce_error(partition: &Partition, mut batch: Vec<u8>) -> i16 {
    let append = LeaderAppend {
        batches: std::slice::from_mut(&mut batch),
        origin: AppendOrigin::Client,
        leader_epoch: 0,
        now_ms: 1_000,
        acks: Acks::Leader,
        timeout_ms: 0,
    };
    match partition.append_as_leader(append, &mut Vec::new()) {
        Err(AppendError::Producer(error)) => error.error_code(),
        Err(other) => panic!("unexpected {other}"),
        Ok(_) => panic!("appended"),
    }
}

#[test]
fn a_reopened_partition_still_holds_the_stable_offset_at_an_open_transaction() {
    let dir = tempfile::tempdir().expect("tempdir");
    {
        let log_dir = LogDir::open(dir.path(), LogConfig::default()).expect("log dir");
        let partition = led_with_follower(&log_dir);
        produce(&partition, batch(6, 0, false));
        produce(&partition, batch(5, 0, true));
        produce(&partition, batch(6, 1, false));
        follower_caught_up_to(&partition, 3);
        assert_eq!(partition.last_stable_offset(), 1);
        partition.log().sync().expect("synced");
    }
    let log_dir = LogDir::open(dir.path(), LogConfig::default()).expect("reopened");
    let partition = led_with_follower(&log_dir);
    follower_caught_up_to(&partition, 3);
    assert_eq!(partition.high_watermark(), 3);
    assert_eq!(
        partition.last_stable_offset(),
        1,
        "replay found the open transaction"
    );
    assert_eq!(partition.open_transaction(5), Some((0, 1)));
}

/// `count` records of `producer_id` from `sequence`, non-transactional.
fn many(producer_id: i64, sequence: i32, count: i32) -> Vec<u8> {
    let mut builder = BatchBuilder::new(0, Compression::None);
    builder.producer_id = producer_id;
    builder.producer_epoch = 0;
    builder.base_sequence = sequence;
    for delta in 0..count {
        builder
            .push(&NewRecord {
                offset_delta: delta,
                timestamp: 1_000,
                key: None,
                value: Some(b"v"),
                headers: &[],
            })
            .expect("fits");
    }
    builder.build().expect("builds")
}

/// Reopens the log in `dir`: producer 5's transaction, opened at offset 0, is still open.
fn reopened_knows_the_open_transaction(dir: &std::path::Path, config: LogConfig, why: &str) {
    let log_dir = LogDir::open(dir, config).expect("reopened");
    let partition = led_with_follower(&log_dir);
    assert_eq!(partition.open_transaction(5), Some((0, 0)), "{why}");
    assert_eq!(partition.last_stable_offset(), 0);
}

/// Appends batches of another producer until the log holds more than the offsets a restart
/// without a snapshot would replay; returns the log end.
fn produce_past_the_replay_window(partition: &Partition) -> i64 {
    let records_per_batch = 5_000;
    let batches = PRODUCER_REPLAY_OFFSETS_MAX / i64::from(records_per_batch) + 2;
    for index in 0..batches {
        let sequence = i32::try_from(index).expect("small") * records_per_batch;
        produce(partition, many(6, sequence, records_per_batch));
    }
    let end = partition.log().log_end_offset().expect("end");
    assert!(
        end > PRODUCER_REPLAY_OFFSETS_MAX + 1,
        "the transaction is out of the window"
    );
    end
}

#[test]
fn a_transaction_older_than_the_replay_window_survives_a_restart_through_the_snapshots() {
    let dir = tempfile::tempdir().expect("tempdir");
    let config = LogConfig {
        segment_bytes: 256 * 1024,
        batch_bytes_max: 128 * 1024,
        ..LogConfig::default()
    };
    {
        let log_dir = LogDir::open(dir.path(), config.clone()).expect("log dir");
        let partition = led_with_follower(&log_dir);
        assert_eq!(produce(&partition, batch(5, 0, true)), 0);
        let end = produce_past_the_replay_window(&partition);
        follower_caught_up_to(&partition, end);
        assert_eq!(partition.last_stable_offset(), 0);
        partition.log().sync().expect("synced");
    }
    reopened_knows_the_open_transaction(
        dir.path(),
        config,
        "the snapshot carried the open transaction",
    );
}

#[test]
fn a_follower_writes_the_index_entry_of_a_fetched_abort_marker() {
    let dir = tempfile::tempdir().expect("tempdir");
    let log_dir = LogDir::open(dir.path(), LogConfig::default()).expect("log dir");
    let partition = led_with_follower(&log_dir);
    // As a leader would send them: a transactional batch at 0, its ABORT marker at 1, epoch 0.
    let mut fetched = batch(5, 0, true);
    let mut marker = EndTxnMarker {
        producer_id: 5,
        producer_epoch: 1,
        coordinator_epoch: 3,
        marker_type: MarkerType::Abort,
    }
    .encode_batch(2_000)
    .expect("marker");
    // Base offset and leader epoch are outside the CRC.
    marker[..8].copy_from_slice(&1i64.to_be_bytes());
    for batch in [&mut fetched, &mut marker] {
        batch[12..16].copy_from_slice(&0i32.to_be_bytes());
    }
    fetched.extend_from_slice(&marker);
    partition
        .append_fetched(&fetched, 2, 2_000)
        .expect("appended");
    let aborted = partition.log().aborted_transactions(0, 2).expect("index");
    assert_eq!(
        aborted,
        vec![skiff_protocol::records::txn::AbortedTxn {
            producer_id: 5,
            first_offset: 0,
            last_offset: 1,
            last_stable_offset: 2,
        }]
    );
    assert_eq!(partition.open_transaction(5), None);
}

#[test]
fn a_new_logs_first_append_writes_no_snapshot_and_a_restart_still_replays_from_its_start() {
    let dir = tempfile::tempdir().expect("tempdir");
    let config = LogConfig {
        batch_bytes_max: 128 * 1024,
        ..LogConfig::default()
    };
    {
        let log_dir = LogDir::open(dir.path(), config.clone()).expect("log dir");
        let partition = led_with_follower(&log_dir);
        assert_eq!(
            partition
                .log()
                .producer_snapshot_offsets()
                .expect("offsets"),
            vec![0]
        );
        assert_eq!(produce(&partition, batch(5, 0, true)), 0);
        assert_eq!(
            partition
                .log()
                .producer_snapshot_offsets()
                .expect("offsets"),
            vec![0],
            "the first append wrote no snapshot of its own"
        );
        let end = produce_past_the_replay_window(&partition);
        assert_eq!(
            partition.log().segment_count().expect("segments"),
            1,
            "no roll"
        );
        follower_caught_up_to(&partition, end);
        partition.log().sync().expect("synced");
    }
    reopened_knows_the_open_transaction(
        dir.path(),
        config,
        "replayed from the creation's snapshot at 0, not from the window",
    );
}
