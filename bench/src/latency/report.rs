//! The latency report of one run: a markdown table (p50, p99, p99.9 and max of produce-ack and
//! end-to-end latency per acks setting and rate) and an SVG of the latency distribution per rate
//! (percentile curves, produce-ack and end-to-end side by side).
//!
//! Must never: show a figure without the machine's load next to it.

use std::fmt::Write as _;

use plotters::prelude::*;

use super::histogram::LatencySummary;
use super::service_time::{KafkaApiTimes, PhaseServiceTimes};
use super::sweep::{Acks, LatencyRecord, RateResult};
use crate::kip283::machine::format_utc;
use crate::kip283::report::{machine_line, PlotError, PALETTE};

/// Where the percentile curves end on the x axis: 100 % (the maximum) is drawn as 99.9995 %.
const NINES_MAX: f64 = 5.3;

/// `-log10(1 - p/100)`: 90 % → 1, 99 % → 2, 99.9 % → 3; the maximum at [`NINES_MAX`].
fn nines(percentile: f64) -> f64 {
    if percentile >= 100.0 {
        NINES_MAX
    } else {
        (-(1.0 - percentile / 100.0).log10()).min(NINES_MAX)
    }
}

fn millis(value: f64) -> String {
    if value >= 100.0 {
        format!("{value:.0}")
    } else if value >= 10.0 {
        format!("{value:.1}")
    } else {
        format!("{value:.2}")
    }
}

fn quartet(summary: Option<&LatencySummary>) -> String {
    match summary {
        Some(s) => format!(
            "{} | {} | {} | {}",
            millis(s.p50_ms),
            millis(s.p99_ms),
            millis(s.p999_ms),
            millis(s.max_ms)
        ),
        None => "— | — | — | —".to_owned(),
    }
}

/// One line per finished rate, for the terminal.
pub fn progress_line(acks: Acks, result: &RateResult) -> String {
    let p = |summary: Option<&LatencySummary>| {
        summary.map_or("—".to_owned(), |s| {
            format!(
                "p50 {} p99 {} p99.9 {} max {} ms",
                millis(s.p50_ms),
                millis(s.p99_ms),
                millis(s.p999_ms),
                millis(s.max_ms)
            )
        })
    };
    format!(
        "acks={} {:.0} % ({:.0} msg/s, achieved {:.0}): produce-ack {}; end-to-end {}",
        acks.label(),
        result.percent_of_max,
        result.target_per_second,
        result.achieved_per_second,
        p(result.produce.as_ref()),
        p(result.end_to_end.as_ref())
    )
}

/// The markdown table (with the run's header lines) of `record`.
pub fn markdown(record: &LatencyRecord) -> String {
    let mut md = String::new();
    let _ = writeln!(md, "### {}\n", record.broker_name);
    let _ = writeln!(md, "- date: {}", format_utc(record.started_unix_seconds));
    let _ = writeln!(md, "- command: `{}`", record.command);
    let _ = writeln!(
        md,
        "- machine before: {}",
        machine_line(&record.machine_before)
    );
    let _ = writeln!(
        md,
        "- load after: {:.2}",
        record.machine_after.load_average_1m
    );
    let _ = writeln!(
        md,
        "- {} s per rate ({} s warm-up not recorded), 1 kB messages, one partition, at most {} records per request and {} requests in flight; latencies in ms from each message's intended send time\n",
        record.seconds, record.warmup_seconds, record.batch_records_max, record.in_flight_max
    );
    if record.parked_fetchers > 0 {
        let _ = writeln!(
            md,
            "- {} idle consumers long-polling an empty topic throughout\n",
            record.parked_fetchers
        );
    }
    md.push_str("| acks | rate | msg/s target | msg/s achieved | produce p50 | p99 | p99.9 | max | end-to-end p50 | p99 | p99.9 | max | send lateness p99 |\n");
    md.push_str("|---|---|---|---|---|---|---|---|---|---|---|---|---|\n");
    for acks in &record.results {
        for rate in &acks.rates {
            let _ = writeln!(
                md,
                "| {} | {:.0} % of {:.0}{} | {:.0} | {:.0} | {} | {} | {} |",
                acks.acks.label(),
                rate.percent_of_max,
                acks.max_per_second,
                if acks.max_measured { "" } else { " (given)" },
                rate.target_per_second,
                rate.achieved_per_second,
                quartet(rate.produce.as_ref()),
                quartet(rate.end_to_end.as_ref()),
                rate.send_lateness
                    .as_ref()
                    .map_or("—".to_owned(), |s| millis(s.p99_ms)),
            );
        }
    }
    md.push_str(&service_time_tables(record));
    md
}

/// A figure in µs as ms with three decimals; `None` is past the histogram's last finite bound.
fn micros_as_ms(value: Option<f64>) -> String {
    value.map_or("> 1000".to_owned(), |us| format!("{:.3}", us / 1000.0))
}

/// The broker's own service time per API at each rate, when the run read it: Skiff's histogram
/// delta, or Kafka's JMX request metrics.
fn service_time_tables(record: &LatencyRecord) -> String {
    let mut skiff = String::new();
    let mut kafka = String::new();
    for acks in &record.results {
        for rate in &acks.rates {
            let at = format!(
                "| {} | {:.0} % ({:.0} msg/s) ",
                acks.acks.label(),
                rate.percent_of_max,
                rate.target_per_second
            );
            match &rate.service_time {
                Some(PhaseServiceTimes::Skiff { apis }) => {
                    for api in apis {
                        let _ = writeln!(
                            skiff,
                            "{at}| {} | {} | {:.3} | {} | {} | {} | {:.2} % |",
                            api.api,
                            api.count,
                            api.mean_us / 1000.0,
                            micros_as_ms(api.p50_us),
                            micros_as_ms(api.p90_us),
                            micros_as_ms(api.p99_us),
                            api.share_within_1ms * 100.0
                        );
                    }
                }
                Some(PhaseServiceTimes::Kafka { apis }) => {
                    for api in apis {
                        kafka.push_str(&kafka_row(&at, api));
                    }
                }
                None => {}
            }
        }
    }
    let mut md = String::new();
    if !skiff.is_empty() {
        md.push_str(
            "\n#### The broker's service time per API (`skiff_request_service_time_us`, ms)\n\n",
        );
        md.push_str("Frame received to response written, less a Fetch's long poll and an acks=all Produce's wait for followers; the histogram's delta over the phase after its warm-up; percentiles interpolated linearly inside their bucket, the mean exact.\n\n");
        md.push_str("| acks | rate | API | requests | mean | p50 | p90 | p99 | ≤ 1 ms |\n|---|---|---|---|---|---|---|---|---|\n");
        md.push_str(&skiff);
    }
    if !kafka.is_empty() {
        md.push_str("\n#### Kafka's request metrics per API (JMX `kafka.network:type=RequestMetrics`, ms)\n\n");
        md.push_str("Phase means exact (from `Count` and `Mean` before and after the phase); percentiles are the decaying reservoir's at the phase's end, which still holds earlier phases' requests. TotalTime p99 − RemoteTime p99 is not the p99 of TotalTime − RemoteTime. Kafka records whole milliseconds (rounded).\n\n");
        md.push_str("| acks | rate | API | requests | mean Total − Remote | Total p50 | Total p99 | Remote p99 | Total p99 − Remote p99 | Local p99 | RequestQueue p99 | ResponseQueue p99 | ResponseSend p99 |\n|---|---|---|---|---|---|---|---|---|---|---|---|---|\n");
        md.push_str(&kafka);
    }
    md
}

/// One Kafka API's row of the request-metrics table.
fn kafka_row(at: &str, api: &KafkaApiTimes) -> String {
    let get = |name: &str| api.histograms.get(name);
    let p99 = |name: &str| get(name).map_or("—".to_owned(), |h| format!("{:.2}", h.p99_ms));
    let (Some(total), Some(remote)) = (get("TotalTimeMs"), get("RemoteTimeMs")) else {
        return format!(
            "{at}| {} | — | — | — | — | — | — | — | — | — | — |\n",
            api.api
        );
    };
    format!(
        "{at}| {} | {} | {:.3} | {:.2} | {:.2} | {:.2} | {:.2} | {} | {} | {} | {} |\n",
        api.api,
        total.count,
        total.phase_mean_ms - remote.phase_mean_ms,
        total.p50_ms,
        total.p99_ms,
        remote.p99_ms,
        total.p99_ms - remote.p99_ms,
        p99("LocalTimeMs"),
        p99("RequestQueueTimeMs"),
        p99("ResponseQueueTimeMs"),
        p99("ResponseSendTimeMs"),
    )
}

/// Which of a rate's summaries a plot panel shows.
type PickSummary = fn(&RateResult) -> Option<&LatencySummary>;

/// The percentile curves of every rate as an SVG: produce-ack on the left, end-to-end on the
/// right, latency on a logarithmic axis.
pub fn plot(record: &LatencyRecord) -> Result<String, PlotError> {
    let panels: [(&str, PickSummary); 2] = [
        ("produce-ack", |rate| rate.produce.as_ref()),
        ("end-to-end", |rate| rate.end_to_end.as_ref()),
    ];
    let all = || {
        record.results.iter().flat_map(|acks| {
            acks.rates.iter().flat_map(|rate| {
                panels
                    .iter()
                    .filter_map(move |(_, pick)| pick(rate))
                    .flat_map(|summary| summary.curve.iter().map(|(_, ms)| *ms))
            })
        })
    };
    let y_min = all().fold(f64::MAX, f64::min).max(0.001) / 1.5;
    let y_max = all().fold(0.0, f64::max).max(y_min * 10.0) * 1.5;
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (1200, 520)).into_drawing_area();
        root.fill(&WHITE)?;
        let root = root.titled(
            &format!("{}: latency by percentile, per rate", record.broker_name),
            ("sans-serif", 20),
        )?;
        let halves = root.split_evenly((1, 2));
        for (area, (title, pick)) in halves.iter().zip(panels) {
            let mut chart = ChartBuilder::on(area)
                .caption(title, ("sans-serif", 16))
                .margin(12)
                .x_label_area_size(40)
                .y_label_area_size(60)
                .build_cartesian_2d(0.0..NINES_MAX, (y_min..y_max).log_scale())?;
            chart
                .configure_mesh()
                .x_desc("percentile")
                .y_desc("ms from intended send")
                .x_labels(7)
                .x_label_formatter(&|x| match x.round() as i64 {
                    0 => "0".to_owned(),
                    1 => "90".to_owned(),
                    2 => "99".to_owned(),
                    3 => "99.9".to_owned(),
                    4 => "99.99".to_owned(),
                    5 => "99.999".to_owned(),
                    _ => String::new(),
                })
                .draw()?;
            let mut index = 0usize;
            for acks in &record.results {
                for rate in &acks.rates {
                    let color = PALETTE[index % PALETTE.len()];
                    index += 1;
                    let Some(summary) = pick(rate) else { continue };
                    chart
                        .draw_series(LineSeries::new(
                            summary
                                .curve
                                .iter()
                                .map(|(percentile, ms)| (nines(*percentile), ms.max(y_min))),
                            color.stroke_width(2),
                        ))?
                        .label(format!(
                            "acks={} {:.0} % ({:.0} msg/s)",
                            acks.acks.label(),
                            rate.percent_of_max,
                            rate.target_per_second
                        ))
                        .legend(move |(x, y)| {
                            PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(2))
                        });
                }
            }
            chart
                .configure_series_labels()
                .background_style(WHITE.mix(0.85))
                .border_style(BLACK)
                .position(SeriesLabelPosition::UpperLeft)
                .draw()?;
        }
        root.present()?;
    }
    Ok(svg)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kip283::machine::Machine;
    use crate::latency::histogram::LatencyHistogram;
    use crate::latency::sweep::AcksResult;

    fn record() -> LatencyRecord {
        let mut histogram = LatencyHistogram::new();
        for micros in 1..=1000u64 {
            histogram.record(0, micros * 1000);
        }
        let machine = Machine {
            cpu_count: 2,
            cpu_model: "test".to_owned(),
            memory_bytes: 1 << 30,
            load_average_1m: 1.5,
        };
        LatencyRecord {
            command: "skiff-bench latency".to_owned(),
            broker_name: "skiff".to_owned(),
            started_unix_seconds: 0,
            machine_before: machine.clone(),
            machine_after: machine,
            seconds: 10.0,
            warmup_seconds: 1.0,
            batch_records_max: 16,
            in_flight_max: 5,
            parked_fetchers: 0,
            results: vec![AcksResult {
                acks: Acks::Leader,
                max_per_second: 1000.0,
                max_measured: true,
                rates: vec![RateResult {
                    percent_of_max: 50.0,
                    target_per_second: 500.0,
                    achieved_per_second: 499.0,
                    message_count: 5000,
                    produce: histogram.summary(),
                    end_to_end: histogram.summary(),
                    send_lateness: None,
                    service_time: None,
                }],
            }],
        }
    }

    #[test]
    fn the_table_has_a_row_per_rate_with_the_load() {
        let md = markdown(&record());
        assert!(md.contains("load average 1.5"), "{md}");
        assert!(md.contains("| 1 | 50 % of 1000 | 500 | 499 | 0.50 | 0.99 | 1.00 | 1.00 | 0.50 | 0.99 | 1.00 | 1.00 | — |"), "{md}");
    }

    #[test]
    fn service_times_get_a_table_per_source() {
        use super::super::service_time::{KafkaHistogram, SkiffApiTime};
        let mut record = record();
        let rate = &mut record.results[0].rates[0];
        rate.service_time = Some(PhaseServiceTimes::Skiff {
            apis: vec![SkiffApiTime {
                api: "Produce".to_owned(),
                count: 4000,
                mean_us: 180.0,
                p50_us: Some(150.0),
                p90_us: Some(400.0),
                p99_us: None,
                share_within_1ms: 0.985,
            }],
        });
        let md = markdown(&record);
        assert!(md.contains("| 1 | 50 % (500 msg/s) | Produce | 4000 | 0.180 | 0.150 | 0.400 | > 1000 | 98.50 % |"), "{md}");
        assert!(!md.contains("Kafka's request metrics"));
        let histogram = |phase_mean_ms, p99_ms| KafkaHistogram {
            count: 4000,
            phase_mean_ms,
            p50_ms: 0.0,
            p99_ms,
            p999_ms: p99_ms,
            max_ms: p99_ms,
        };
        let histograms = [
            ("TotalTimeMs", histogram(1.5, 4.0)),
            ("RemoteTimeMs", histogram(1.0, 3.0)),
        ]
        .into_iter()
        .map(|(name, h)| (name.to_owned(), h))
        .collect();
        record.results[0].rates[0].service_time = Some(PhaseServiceTimes::Kafka {
            apis: vec![KafkaApiTimes {
                api: "Fetch".to_owned(),
                histograms,
            }],
        });
        let md = markdown(&record);
        assert!(md.contains("| 1 | 50 % (500 msg/s) | Fetch | 4000 | 0.500 | 0.00 | 4.00 | 3.00 | 1.00 | — | — | — | — |"), "{md}");
    }

    #[test]
    fn the_plot_has_a_curve_per_rate_in_both_panels() {
        let svg = plot(&record()).unwrap();
        assert_eq!(svg.matches("acks=1 50 % (500 msg/s)").count(), 2);
        assert!(nines(99.0) > 1.99 && nines(99.0) < 2.01);
        assert_eq!(nines(100.0), NINES_MAX);
    }
}
