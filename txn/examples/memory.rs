//! Heap bytes the transaction coordinator holds per transactional id and per open transaction,
//! measured with a counting allocator around the system one (the broker's RSS adds allocator
//! slack on top; `docs/design/transactions.md` gives both figures).
//!
//! `cargo run --release -p skiff-txn --example memory -- [ids] [open] [partitions]`: `ids`
//! transactional ids initialised (each persisted), then `open` of them with a transaction open
//! over `partitions` partitions each. Prints the bytes per id and per open transaction.

use std::alloc::{GlobalAlloc, Layout, System};
use std::process::ExitCode;
use std::sync::atomic::{AtomicUsize, Ordering};

use skiff_txn::{
    AddPartitions, Coordinator, InitProducerId, Output, RequestMeta, TopicPartition, TxnConfig,
};

/// The system allocator, counting the bytes live.
struct Counting;

static LIVE_BYTES: AtomicUsize = AtomicUsize::new(0);

// SAFETY: every call is forwarded to the system allocator unchanged; only a counter is added.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        LIVE_BYTES.fetch_add(layout.size(), Ordering::Relaxed);
        System.alloc(layout)
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE_BYTES.fetch_sub(layout.size(), Ordering::Relaxed);
        System.dealloc(ptr, layout);
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        LIVE_BYTES.fetch_sub(layout.size(), Ordering::Relaxed);
        LIVE_BYTES.fetch_add(new_size, Ordering::Relaxed);
        System.realloc(ptr, layout, new_size)
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

/// Transactional ids initialised when no count is given.
const IDS_DEFAULT: usize = 100_000;
/// Of them, how many open a transaction.
const OPEN_DEFAULT: usize = 10_000;
/// Partitions in each open transaction.
const PARTITIONS_DEFAULT: i32 = 8;
/// The first coordinator epoch (any will do: one broker leads every state partition).
const COORDINATOR_EPOCH: i32 = 1;

/// Answers every output at once: records persisted, producer-id blocks granted, markers ignored.
fn drain(coordinator: &mut Coordinator, now_ms: i64, next_block: &mut i64) {
    while let Some(output) = coordinator.poll_output() {
        match output {
            Output::Persist { persist_id, .. } => coordinator.persisted(now_ms, persist_id, Ok(())),
            Output::NeedProducerIds => {
                let start = *next_block;
                *next_block += 1_000_000;
                coordinator.producer_ids_granted(now_ms, Some((start, *next_block)));
            }
            Output::Reply { .. } | Output::SendMarkers { .. } => {}
        }
    }
}

fn arg(index: usize, default: usize) -> Option<usize> {
    match std::env::args().nth(index) {
        None => Some(default),
        Some(text) => text.parse().ok(),
    }
}

fn main() -> ExitCode {
    let (Some(ids), Some(open), Some(partitions)) = (
        arg(1, IDS_DEFAULT),
        arg(2, OPEN_DEFAULT),
        arg(3, PARTITIONS_DEFAULT as usize),
    ) else {
        eprintln!("usage: memory [ids] [open] [partitions] (whole numbers)");
        return ExitCode::FAILURE;
    };
    let Ok(partitions) = i32::try_from(partitions) else {
        eprintln!("too many partitions");
        return ExitCode::FAILURE;
    };
    let config = TxnConfig::default();
    let mut coordinator = Coordinator::new(config.clone());
    let now_ms = 1_000;
    let mut next_block = 0;
    for partition in 0..config.state_log_partitions {
        coordinator.partition_led(partition, COORDINATOR_EPOCH);
        coordinator.load_partition(now_ms, partition, COORDINATOR_EPOCH, Vec::new());
    }
    drain(&mut coordinator, now_ms, &mut next_block);
    let mut request_id = 0;
    let mut meta = |version| {
        request_id += 1;
        RequestMeta {
            request_id,
            version,
        }
    };
    let empty = LIVE_BYTES.load(Ordering::Relaxed);
    let mut producers = Vec::with_capacity(open);
    for index in 0..ids {
        let transactional_id = format!("memory-{index:08}");
        coordinator.handle_init_producer_id(
            now_ms,
            meta(4),
            InitProducerId {
                transactional_id: Some(transactional_id.clone()),
                timeout_ms: 60_000,
                producer_id: -1,
                producer_epoch: -1,
            },
        );
        drain(&mut coordinator, now_ms, &mut next_block);
        if producers.len() < open {
            producers.push(transactional_id);
        }
    }
    let with_ids = LIVE_BYTES.load(Ordering::Relaxed);
    for transactional_id in &producers {
        let Some(metadata) = coordinator.metadata(transactional_id) else {
            eprintln!("{transactional_id} was not initialised");
            return ExitCode::FAILURE;
        };
        let (producer_id, producer_epoch) = (metadata.producer_id, metadata.producer_epoch);
        coordinator.handle_add_partitions(
            now_ms,
            meta(3),
            AddPartitions {
                transactional_id: transactional_id.clone(),
                producer_id,
                producer_epoch,
                partitions: (0..partitions)
                    .map(|partition| TopicPartition::new("memory-topic", partition))
                    .collect(),
                client_tv: 1,
            },
        );
        drain(&mut coordinator, now_ms, &mut next_block);
    }
    let with_open = LIVE_BYTES.load(Ordering::Relaxed);
    let per_id = with_ids.saturating_sub(empty) as f64 / ids.max(1) as f64;
    let per_open = with_open.saturating_sub(with_ids) as f64 / open.max(1) as f64;
    println!(
        "transactional ids: {ids}, coordinator heap {} bytes",
        with_ids - empty
    );
    println!("heap bytes per transactional id: {per_id:.0}");
    println!(
        "open transactions: {open} of {partitions} partitions, heap bytes per open transaction: \
         {per_open:.0} ({:.0} per partition)",
        per_open / f64::from(partitions.max(1))
    );
    println!(
        "bound at the defaults: skiff.transactional.ids.max {} ids = {:.0} MiB",
        config.transactional_ids_max,
        per_id * config.transactional_ids_max as f64 / 1_048_576.0
    );
    ExitCode::SUCCESS
}
