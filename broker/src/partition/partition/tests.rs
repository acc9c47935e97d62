//! The partition's writes end its high-watermark ritual themselves: the HW rises, the acks=all
//! waits it passed complete, the fetches parked on the partition wake (only when something new
//! became readable) and the ISR changes the machine proposed are queued.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Waker};

use skiff_cluster::records::{PartitionState, Writer};
use skiff_cluster::replica::{Acks, FetchAnswer, FollowerFetch, ReplicaConfig};
use skiff_protocol::error_code::ErrorCode;
use skiff_protocol::records::record::{BatchBuilder, NewRecord};
use skiff_protocol::records::Compression;
use skiff_storage::{LogConfig, LogDir};

use super::*;
use crate::partition::replica::proposal_channel;

/// How long after the state feed a follower that never fetched is out of the ISR
/// (`replica.lag.time.max.ms`).
const LAG_MAX_MS: u64 = 30_000;

/// Partition 0 of `t` on broker 1, which leads it at epoch 0 with `replicas` and `isr`, over an
/// empty log in `dir` (the directory is returned to keep its logs open).
fn led(dir: &std::path::Path, replicas: Vec<i32>, isr: Vec<i32>) -> (LogDir, Partition) {
    let log_dir = LogDir::open(dir, LogConfig::default()).expect("log dir");
    let log = log_dir.create("t", 0, None).expect("log");
    let config = ReplicaConfig {
        replica_lag_time_max_ms: LAG_MAX_MS,
        min_insync_replicas: 1,
        ..ReplicaConfig::default()
    };
    let partition = Partition::new(
        0,
        log,
        PartitionProducers::default(),
        PartitionReplica::new(1, config, 0),
    );
    let state = PartitionState {
        leader: 1,
        leader_epoch: 0,
        isr,
        replicas,
        writer: Writer::Creator,
    };
    let mut proposals = Vec::new();
    partition.apply_state(&state, 1, &mut proposals);
    assert!(proposals.is_empty());
    assert_eq!(partition.fed_revision(), 1);
    (log_dir, partition)
}

/// A v2 batch of one record (value "v", timestamp 1000).
pub(crate) fn one_record() -> Vec<u8> {
    let mut builder = BatchBuilder::new(0, Compression::None);
    let record = NewRecord {
        offset_delta: 0,
        timestamp: 1_000,
        key: None,
        value: Some(b"v"),
        headers: &[],
    };
    builder.push(&record).expect("fits");
    builder.build().expect("builds")
}

/// Appends one record as a client would, with `acks`.
fn produce(
    partition: &Partition,
    acks: Acks,
    timeout_ms: u64,
    proposals: impl ProposalSink,
) -> LeaderAppended {
    let leader_epoch = partition.admit_produce(acks).expect("admitted");
    let mut batch = one_record();
    let append = LeaderAppend {
        batches: std::slice::from_mut(&mut batch),
        origin: AppendOrigin::Client,
        leader_epoch,
        now_ms: 1_000,
        acks,
        timeout_ms,
    };
    partition
        .append_as_leader(append, proposals)
        .expect("appended")
}

/// Broker 2's fetch from `offset` at epoch 0.
fn follower_fetch(offset: i64) -> FollowerFetch {
    FollowerFetch {
        replica: 2,
        fetch_offset: offset,
        last_fetched_epoch: (offset > 0).then_some(0),
        current_leader_epoch: 0,
    }
}

fn is_ready<F: Future + Unpin>(future: &mut F) -> bool {
    let mut context = Context::from_waker(Waker::noop());
    Pin::new(future).poll(&mut context).is_ready()
}

#[test]
fn a_follower_fetch_past_an_acks_all_append_raises_the_hw_completes_the_wait_and_wakes_fetches() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (_log_dir, partition) = led(dir.path(), vec![1, 2], vec![1, 2]);
    let (sender, _queued) = proposal_channel();
    let appended = produce(&partition, Acks::All, 30_000, &sender);
    assert_eq!((appended.base_offset, appended.last_offset), (0, 0));
    assert!(appended.stored);
    let mut wait = appended.replication.expect("acks=all waits");
    assert_eq!(
        partition.high_watermark(),
        0,
        "the follower has not fetched it"
    );
    assert!(wait.try_recv().is_err(), "nothing answered yet");

    // A consumer parks after the append; a fetch that brings the follower nothing new to the
    // HW leaves it parked.
    let mut parked = partition.waiter();
    let answer = partition
        .answer_follower_fetch(crate::clock::mono_ms(), follower_fetch(0), &sender)
        .expect("answered");
    assert!(matches!(
        answer,
        FetchAnswer::Records { from: 0, to: 1, .. }
    ));
    assert_eq!(partition.high_watermark(), 0);
    assert!(!is_ready(&mut parked), "woken without a HW rise");
    assert!(wait.try_recv().is_err());

    // Its next fetch says it has offset 0: the HW passes the append.
    let answer = partition
        .answer_follower_fetch(crate::clock::mono_ms(), follower_fetch(1), &sender)
        .expect("answered");
    assert_eq!(
        answer,
        FetchAnswer::Records {
            from: 1,
            to: 1,
            high_watermark: 1
        }
    );
    assert_eq!(partition.high_watermark(), 1);
    assert_eq!(wait.try_recv(), Ok(None), "replicated");
    assert!(is_ready(&mut parked), "the consumer may read further");
}

#[test]
fn led_alone_an_append_raises_the_hw_at_once_and_wakes_the_parked_fetches() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (_log_dir, partition) = led(dir.path(), vec![1], vec![1]);
    let mut parked = partition.waiter();
    let mut proposals = Vec::new();
    let appended = produce(&partition, Acks::All, 30_000, &mut proposals);
    assert_eq!(partition.high_watermark(), 1);
    let mut wait = appended.replication.expect("acks=all waits");
    assert_eq!(wait.try_recv(), Ok(None));
    assert!(is_ready(&mut parked));
    assert!(proposals.is_empty());
    // acks=1 comes back without a wait.
    let appended = produce(&partition, Acks::Leader, 30_000, &mut proposals);
    assert!(appended.replication.is_none());
    assert_eq!((appended.base_offset, partition.high_watermark()), (1, 2));
}

#[test]
fn a_caught_up_follower_outside_the_isr_gets_an_expansion_queued() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (_log_dir, partition) = led(dir.path(), vec![1, 2], vec![1]);
    let (sender, mut queued) = proposal_channel();
    produce(&partition, Acks::Leader, 0, &sender);
    assert_eq!(partition.high_watermark(), 1, "the ISR is the leader alone");
    assert!(queued.try_recv().is_err());
    partition
        .answer_follower_fetch(crate::clock::mono_ms(), follower_fetch(1), &sender)
        .expect("answered");
    let proposal = queued.try_recv().expect("an expansion was queued");
    assert_eq!((proposal.topic.as_str(), proposal.index), ("t", 0));
    assert_eq!(proposal.expected_revision, 1);
    assert_eq!(proposal.state.isr, vec![1, 2]);
    // One change in flight at a time: the next fetch proposes nothing until it is answered.
    partition
        .answer_follower_fetch(crate::clock::mono_ms(), follower_fetch(1), &sender)
        .expect("answered");
    assert!(queued.try_recv().is_err());
    // Refused by the store: the machine proposes again at the follower's next fetch.
    proposal.refused();
    partition
        .answer_follower_fetch(crate::clock::mono_ms(), follower_fetch(1), &sender)
        .expect("answered");
    assert_eq!(queued.try_recv().expect("again").state.isr, vec![1, 2]);
}

#[test]
fn the_leader_poll_queues_a_shrink_for_a_silent_follower_and_times_out_its_waits() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (_log_dir, partition) = led(dir.path(), vec![1, 2], vec![1, 2]);
    let mut proposals = Vec::new();
    let appended = produce(&partition, Acks::All, 10, &mut proposals);
    let mut wait = appended.replication.expect("acks=all waits");
    partition.poll_as_leader(crate::clock::mono_ms(), &mut proposals);
    assert!(proposals.is_empty(), "the follower is not late yet");

    let late = crate::clock::mono_ms() + LAG_MAX_MS + 1_000;
    partition.poll_as_leader(late, &mut proposals);
    assert_eq!(
        wait.try_recv(),
        Ok(Some(ErrorCode::REQUEST_TIMED_OUT)),
        "past its deadline"
    );
    let [proposal] = proposals.as_slice() else {
        panic!("one shrink expected, got {}", proposals.len());
    };
    assert_eq!(proposal.state.isr, vec![1]);
    assert_eq!(proposal.expected_revision, 1);
}

#[test]
fn a_proposal_the_stopped_driver_cannot_take_is_refused_so_the_machine_proposes_again() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (_log_dir, partition) = led(dir.path(), vec![1, 2], vec![1, 2]);
    let (sender, queued) = proposal_channel();
    drop(queued);
    let late = crate::clock::mono_ms() + LAG_MAX_MS + 1_000;
    partition.poll_as_leader(late, &sender);
    let mut proposals = Vec::new();
    partition.poll_as_leader(late, &mut proposals);
    assert_eq!(proposals.len(), 1, "not left waiting for an answer");
}

#[test]
fn a_coordinator_append_is_synced_and_waits_for_the_hw() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (_log_dir, partition) = led(dir.path(), vec![1, 2], vec![1, 2]);
    let leader_epoch = partition.admit_produce(Acks::All).expect("admitted");
    let mut batches = vec![one_record(), one_record()];
    let bytes: u64 = batches.iter().map(|batch| batch.len() as u64).sum();
    let (sender, _queued) = proposal_channel();
    let append = LeaderAppend {
        batches: &mut batches,
        origin: AppendOrigin::Coordinator,
        leader_epoch,
        now_ms: 1_000,
        acks: Acks::All,
        timeout_ms: 30_000,
    };
    let appended = partition
        .append_as_leader(append, &sender)
        .expect("appended");
    assert_eq!(
        (appended.base_offset, appended.last_offset, appended.bytes),
        (0, 1, bytes)
    );
    let mut wait = appended.replication.expect("a coordinator waits");
    assert!(wait.try_recv().is_err());
    partition
        .answer_follower_fetch(crate::clock::mono_ms(), follower_fetch(2), &sender)
        .expect("answered");
    assert_eq!(wait.try_recv(), Ok(None));
}

#[test]
fn the_led_epoch_is_published_only_once_the_machine_leads_at_it() {
    let dir = tempfile::tempdir().expect("tempdir");
    let log_dir = LogDir::open(dir.path(), LogConfig::default()).expect("log dir");
    let log = log_dir.create("t", 0, None).expect("log");
    let partition = Partition::new(
        0,
        log,
        PartitionProducers::default(),
        PartitionReplica::new(1, ReplicaConfig::default(), 0),
    );
    assert_eq!(partition.led_epoch(), None, "nothing fed yet");
    let state = |leader: i32, leader_epoch: i32| PartitionState {
        leader,
        leader_epoch,
        isr: vec![1, 2],
        replicas: vec![1, 2],
        writer: Writer::Creator,
    };
    let mut proposals = Vec::new();
    partition.apply_state(&state(2, 4), 1, &mut proposals);
    assert_eq!(
        partition.led_epoch(),
        None,
        "a follower (the image may already say otherwise)"
    );
    partition.apply_state(&state(1, 5), 2, &mut proposals);
    assert_eq!(partition.led_epoch(), Some(5));
    partition.apply_state(&state(2, 6), 3, &mut proposals);
    assert_eq!(partition.led_epoch(), None, "led elsewhere again");
}

/// A follower appends the fetched batches below `up_to` straight from the fetched bytes, byte for
/// byte (the leader's offsets and epochs kept); a torn last batch and the batches from `up_to` on
/// stay out; a batch that fails storage's checks (its CRC here) is refused with nothing written.
#[test]
fn a_follower_appends_the_whole_fetched_batches_below_up_to_as_they_are() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (_log_dir, partition) = led(dir.path(), vec![1, 2], vec![1, 2]);
    let mut fetched = Vec::new();
    for (offset, epoch) in [(0i64, 0i32), (1, 0), (2, 1)] {
        // Base offset and leader epoch, as the leader stamped them (outside the CRC).
        let mut batch = one_record();
        batch[..8].copy_from_slice(&offset.to_be_bytes());
        batch[12..16].copy_from_slice(&epoch.to_be_bytes());
        fetched.extend_from_slice(&batch);
    }
    let batch_bytes = one_record().len();
    let torn = one_record();
    fetched.extend_from_slice(&torn[..torn.len() / 2]);
    partition
        .append_fetched(&fetched, 2, 1_000)
        .expect("appended");
    let log = partition.log();
    assert_eq!(log.log_end_offset().expect("end"), 2, "up to 2 only");
    let stored = log
        .read(0, 1 << 20, true)
        .expect("read")
        .bytes()
        .expect("bytes");
    assert_eq!(
        &stored[..],
        &fetched[..2 * batch_bytes],
        "the leader's bytes"
    );
    // The next fetch starts at the log end.
    partition
        .append_fetched(&fetched[2 * batch_bytes..], 10, 1_000)
        .expect("the third, not the torn tail");
    assert_eq!(log.log_end_offset().expect("end"), 3);
    let mut damaged = one_record();
    damaged[..8].copy_from_slice(&3i64.to_be_bytes());
    let last = damaged.len() - 1;
    damaged[last] ^= 0xFF;
    assert!(partition.append_fetched(&damaged, 10, 1_000).is_err());
    assert_eq!(log.log_end_offset().expect("end"), 3, "nothing written");
}
