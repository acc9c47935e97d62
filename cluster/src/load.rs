//! When a broker writes its load report to `R/load/<id>` (docs/design/cluster.md §5.1, Pulsar's
//! rule): when any figure moved by more than [`LOAD_REPORT_CHANGE_RATIO`], never more often than
//! every [`LOAD_REPORT_INTERVAL_MS_MIN`], and at least every [`LOAD_REPORT_INTERVAL_MS_MAX`]. The
//! figures are placement's (utilisation, write rate, disk) and the traffic totals the shedder
//! weighs (bytes in, replication bytes in, bytes out). The key lives on the broker's lease, so a
//! dead broker's report goes with it and placement never chooses a corpse.
//!
//! Must never: read the clock (the record's `sample_ms` is the time) or submit the Txn.

use skiff_meta::{LeaseId, Txn, TxnOp};
use skiff_placement::NodeId;

use crate::layout::{Key, Layout};
use crate::records::{encode, LoadRecord};

/// A figure that moved by more than this share of its last published value makes a report due.
pub const LOAD_REPORT_CHANGE_RATIO: f64 = 0.10;
/// The shortest time between two reports of one broker.
pub const LOAD_REPORT_INTERVAL_MS_MIN: u64 = 5_000;
/// The longest time between two reports of one broker.
pub const LOAD_REPORT_INTERVAL_MS_MAX: u64 = 60_000;
/// The least a placement figure's move is measured against (a percentage point, a byte): an
/// unknown figure (−1) becoming a small known one counts as a move.
const FIGURE_SCALE_MIN: f64 = 1.0;
/// The least a traffic total's move is measured against, in bytes per second (one small record a
/// second): below it a broker is idle for the shedder (which ignores far more), and without it
/// the jitter of a few stray bytes would rewrite an idle broker's report every 5 s.
const TRAFFIC_SCALE_MIN_BYTES_PER_SECOND: f64 = 1024.0;

/// Each compared figure of `record`, with the least its moves are measured against.
fn figures(record: &LoadRecord) -> [(f64, f64); 9] {
    let report = &record.report;
    let traffic = &record.traffic;
    [
        (report.journal_io_util_pct, FIGURE_SCALE_MIN),
        (report.log_io_util_pct, FIGURE_SCALE_MIN),
        (report.cpu_used_pct, FIGURE_SCALE_MIN),
        (report.write_bytes_per_second, FIGURE_SCALE_MIN),
        (report.disk_free_bytes, FIGURE_SCALE_MIN),
        (report.disk_total_bytes, FIGURE_SCALE_MIN),
        (
            traffic.bytes_in_per_second,
            TRAFFIC_SCALE_MIN_BYTES_PER_SECOND,
        ),
        (
            traffic.replication_bytes_in_per_second,
            TRAFFIC_SCALE_MIN_BYTES_PER_SECOND,
        ),
        (
            traffic.bytes_out_per_second,
            TRAFFIC_SCALE_MIN_BYTES_PER_SECOND,
        ),
    ]
}

/// Whether `next` (sampled at its `sample_ms`) is to be written, given the last report written.
pub fn report_due(last: Option<&LoadRecord>, next: &LoadRecord) -> bool {
    let Some(last) = last else { return true };
    let age_ms = next.sample_ms.saturating_sub(last.sample_ms);
    if age_ms < LOAD_REPORT_INTERVAL_MS_MIN {
        return false;
    }
    if age_ms >= LOAD_REPORT_INTERVAL_MS_MAX {
        return true;
    }
    figures(last)
        .iter()
        .zip(figures(next))
        .any(|((before, scale_min), (after, _))| {
            let scale = before.abs().max(*scale_min);
            (after - before).abs() > LOAD_REPORT_CHANGE_RATIO * scale
        })
}

/// Writes `record` as `node`'s report on `lease`.
pub fn put_report(layout: &Layout, node: NodeId, record: &LoadRecord, lease: LeaseId) -> Txn {
    Txn::new().and_then(vec![TxnOp::put_with_lease(
        layout.key(&Key::Load(node)),
        encode(record),
        lease,
    )])
}

#[cfg(test)]
mod tests {
    use skiff_placement::LoadReport;

    use super::*;
    use crate::records::TrafficRecord;

    fn record(util: f64, sample_ms: u64) -> LoadRecord {
        LoadRecord {
            report: LoadReport::with_util(util),
            write_capacity_bytes_per_second: 0,
            sample_ms,
            traffic: Default::default(),
        }
    }

    fn with_traffic(bytes_in: f64, replication: f64, bytes_out: f64, sample_ms: u64) -> LoadRecord {
        LoadRecord {
            traffic: TrafficRecord {
                bytes_in_per_second: bytes_in,
                replication_bytes_in_per_second: replication,
                bytes_out_per_second: bytes_out,
                ..TrafficRecord::default()
            },
            ..record(50.0, sample_ms)
        }
    }

    #[test]
    fn a_report_is_due_on_a_ten_percent_move_but_not_twice_in_five_seconds() {
        let last = record(50.0, 100_000);
        assert!(report_due(None, &record(1.0, 0)));
        // A big move, too soon.
        assert!(!report_due(Some(&last), &record(90.0, 104_999)));
        // A small move, after the minimum: not due; a big one: due.
        assert!(!report_due(Some(&last), &record(54.0, 110_000)));
        assert!(report_due(Some(&last), &record(56.0, 110_000)));
        // Nothing moved, but a minute passed.
        assert!(report_due(Some(&last), &record(50.0, 160_000)));
        // Unknown figures (-1) moving to small known ones count against a scale of 1.
        let unknown = LoadRecord {
            report: LoadReport::unknown(),
            ..last
        };
        assert!(report_due(Some(&unknown), &record(0.5, 110_000)));
    }

    #[test]
    fn each_traffic_total_moving_ten_percent_makes_a_report_due() {
        let last = with_traffic(100_000.0, 50_000.0, 200_000.0, 100_000);
        // Each total in turn moves 11 %, the others not at all: due each time.
        for next in [
            with_traffic(111_000.0, 50_000.0, 200_000.0, 105_000),
            with_traffic(100_000.0, 55_500.0, 200_000.0, 105_000),
            with_traffic(100_000.0, 50_000.0, 178_000.0, 105_000),
        ] {
            assert!(report_due(Some(&last), &next), "{:?}", next.traffic);
        }
        // 9 % moves of all three: not due; due once the minute is up.
        let small = with_traffic(109_000.0, 45_500.0, 218_000.0, 105_000);
        assert!(!report_due(Some(&last), &small));
        assert!(report_due(
            Some(&last),
            &LoadRecord {
                sample_ms: 160_000,
                ..small
            }
        ));
        // An 11 % move, but within 5 s of the last report.
        assert!(!report_due(
            Some(&last),
            &with_traffic(111_000.0, 50_000.0, 200_000.0, 104_999)
        ));
    }

    #[test]
    fn an_idle_brokers_traffic_moves_against_a_floor_of_a_kilobyte_a_second() {
        let idle = with_traffic(0.0, 0.0, 10.0, 100_000);
        // A few stray bytes are no move; a broker starting to take 1 KiB/s is.
        assert!(!report_due(
            Some(&idle),
            &with_traffic(90.0, 0.0, 100.0, 105_000)
        ));
        assert!(report_due(
            Some(&idle),
            &with_traffic(1_024.0, 0.0, 10.0, 105_000)
        ));
    }
}
