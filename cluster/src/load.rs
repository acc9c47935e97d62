//! When a broker writes its load report to `R/load/<id>` (cluster.md §5.1, Pulsar's rule): when
//! any figure moved by more than [`LOAD_REPORT_CHANGE_RATIO`], never more often than every
//! [`LOAD_REPORT_INTERVAL_MS_MIN`], and at least every [`LOAD_REPORT_INTERVAL_MS_MAX`]. The key
//! lives on the broker's lease, so a dead broker's report goes with it and placement never
//! chooses a corpse.
//!
//! Must never: read the clock (`now_ms` is an argument) or submit the Txn.

use skiff_meta::{LeaseId, Txn, TxnOp};
use skiff_placement::{LoadReport, NodeId};

use crate::layout::{Key, Layout};
use crate::records::{encode, LoadRecord};

/// A figure that moved by more than this share of its last published value makes a report due.
pub const LOAD_REPORT_CHANGE_RATIO: f64 = 0.10;
/// The shortest time between two reports of one broker.
pub const LOAD_REPORT_INTERVAL_MS_MIN: u64 = 5_000;
/// The longest time between two reports of one broker.
pub const LOAD_REPORT_INTERVAL_MS_MAX: u64 = 60_000;

fn figures(report: &LoadReport) -> [f64; 6] {
    [
        report.journal_io_util_pct,
        report.log_io_util_pct,
        report.cpu_used_pct,
        report.write_bytes_per_second,
        report.disk_free_bytes,
        report.disk_total_bytes,
    ]
}

/// Whether `next` (sampled at `now_ms`) is to be written, given the last report written.
pub fn report_due(last: Option<&LoadRecord>, next: &LoadReport, now_ms: u64) -> bool {
    let Some(last) = last else { return true };
    let age_ms = now_ms.saturating_sub(last.sample_ms);
    if age_ms < LOAD_REPORT_INTERVAL_MS_MIN {
        return false;
    }
    if age_ms >= LOAD_REPORT_INTERVAL_MS_MAX {
        return true;
    }
    figures(&last.report)
        .iter()
        .zip(figures(next))
        .any(|(before, after)| {
            let scale = before.abs().max(1.0);
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
    use super::*;

    fn record(util: f64, sample_ms: u64) -> LoadRecord {
        LoadRecord {
            report: LoadReport::with_util(util),
            write_capacity_bytes_per_second: 0,
            sample_ms,
            traffic: Default::default(),
        }
    }

    #[test]
    fn a_report_is_due_on_a_ten_percent_move_but_not_twice_in_five_seconds() {
        let last = record(50.0, 100_000);
        assert!(report_due(None, &LoadReport::with_util(1.0), 0));
        // A big move, too soon.
        assert!(!report_due(
            Some(&last),
            &LoadReport::with_util(90.0),
            104_999
        ));
        // A small move, after the minimum: not due; a big one: due.
        assert!(!report_due(
            Some(&last),
            &LoadReport::with_util(54.0),
            110_000
        ));
        assert!(report_due(
            Some(&last),
            &LoadReport::with_util(56.0),
            110_000
        ));
        // Nothing moved, but a minute passed.
        assert!(report_due(
            Some(&last),
            &LoadReport::with_util(50.0),
            160_000
        ));
        // Unknown figures (-1) moving to small known ones count against a scale of 1.
        let unknown = LoadRecord {
            report: LoadReport::unknown(),
            ..last
        };
        assert!(report_due(
            Some(&unknown),
            &LoadReport::with_util(0.5),
            110_000
        ));
    }
}
