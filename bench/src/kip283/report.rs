//! The report: the JSON each subcommand writes ([`RunRecord`]), and `bench/reports/kip283.md` with
//! its SVG plots (throughput against chunk size, RSS over time lazy against eager) rendered from
//! them. Rendering is pure (records in, strings out); the binary does the file IO.
//!
//! Must never: show a figure without its spread and sample count, or a throughput without its
//! fraction of the loopback baseline when one was measured.

use std::fmt::Write as _;

use plotters::prelude::*;
use serde::{Deserialize, Serialize};

use super::baseline::BaselineOutcome;
use super::consume::PassOutcome;
use super::machine::{format_utc, Machine};
use super::memory::MemoryResult;
use super::stats::Spread;
use super::throughput::{SecurityProtocol, Setting, SettingResult, VERSIONS};

/// One subcommand's run, as written to `<data>/<kind>.json`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RunRecord {
    /// The command line.
    pub command: String,
    /// When it started.
    pub started_unix_seconds: u64,
    /// The machine before.
    pub machine_before: Machine,
    /// The machine after.
    pub machine_after: Machine,
    /// Throughput results, if this was a throughput run.
    #[serde(default)]
    pub throughput: Vec<SettingResult>,
    /// Whether the run stopped at its time cap before every setting was measured.
    #[serde(default)]
    pub truncated: bool,
    /// Memory results, if this was a memory run.
    #[serde(default)]
    pub memory: Vec<MemoryResult>,
    /// Baseline transfers, if this was a baseline run.
    #[serde(default)]
    pub baseline: Vec<BaselineOutcome>,
    /// `sendfile` baseline transfers (`baseline --sendfile-file-mib`), if any.
    #[serde(default)]
    pub baseline_sendfile: Vec<BaselineOutcome>,
    /// The `sendfile` baseline taking turns as one Fetch in flight does (`baseline --turns`).
    #[serde(default)]
    pub baseline_sendfile_turns: Vec<BaselineOutcome>,
}

/// The records the report is built from (any may be missing).
#[derive(Debug, Default)]
pub struct Inputs {
    /// `throughput.json`.
    pub throughput: Option<RunRecord>,
    /// `memory.json`.
    pub memory: Option<RunRecord>,
    /// `baseline.json`.
    pub baseline: Option<RunRecord>,
}

/// Rendered report files.
#[derive(Debug)]
pub struct Rendered {
    /// `kip283.md`.
    pub markdown: String,
    /// `kip283-throughput.svg`, when there were chunk sizes to plot.
    pub throughput_svg: Option<String>,
    /// `kip283-rss.svg`, when there was a memory run.
    pub rss_svg: Option<String>,
}

/// File name of the throughput plot.
pub const THROUGHPUT_SVG: &str = "kip283-throughput.svg";
/// File name of the RSS plot.
pub const RSS_SVG: &str = "kip283-rss.svg";

const MB: f64 = 1e6;
const MIB: f64 = 1024.0 * 1024.0;

/// The label of a Fetch version in tables.
pub fn version_label(version: i16) -> String {
    match version {
        0 | 1 => format!("v2→v0 (Fetch v{version})"),
        2 | 3 => format!("v2→v1 (Fetch v{version})"),
        _ => format!("modern (Fetch v{version})"),
    }
}

/// Spread of the baseline in bytes per second.
pub fn baseline_spread(inputs: &Inputs) -> Option<Spread> {
    outcomes_spread(&inputs.baseline.as_ref()?.baseline)
}

/// Spread of the streamed `sendfile` baseline in bytes per second.
fn sendfile_baseline_spread(inputs: &Inputs) -> Option<Spread> {
    outcomes_spread(&inputs.baseline.as_ref()?.baseline_sendfile)
}

fn outcomes_spread(outcomes: &[BaselineOutcome]) -> Option<Spread> {
    Spread::of(
        &outcomes
            .iter()
            .map(BaselineOutcome::bytes_per_second)
            .collect::<Vec<_>>(),
    )
}

/// Spread of the timed PLAINTEXT passes of `version` at `setting`, over every repetition, in
/// bytes/s.
pub fn pass_spread(results: &[SettingResult], setting: Setting, version: i16) -> Option<Spread> {
    security_pass_spread(results, setting, version, SecurityProtocol::Plaintext)
}

/// Spread of the timed passes of `version` at `setting` through `security`'s listener.
pub fn security_pass_spread(
    results: &[SettingResult],
    setting: Setting,
    version: i16,
    security: SecurityProtocol,
) -> Option<Spread> {
    let samples: Vec<f64> = results
        .iter()
        .filter(|result| result.setting == setting)
        .flat_map(|result| {
            result
                .versions
                .iter()
                .filter(|v| v.version == version && v.security == security)
        })
        .flat_map(|v| v.passes.iter().map(PassOutcome::bytes_per_second))
        .collect();
    Spread::of(&samples)
}

/// Spread of PLAINTEXT modern fetch over every setting (its path does not depend on the
/// conversion setting).
pub fn modern_spread(results: &[SettingResult]) -> Option<Spread> {
    let samples: Vec<f64> = results
        .iter()
        .flat_map(|result| {
            result
                .versions
                .iter()
                .filter(|v| v.version >= 4 && v.security == SecurityProtocol::Plaintext)
        })
        .flat_map(|v| v.passes.iter().map(PassOutcome::bytes_per_second))
        .collect();
    Spread::of(&samples)
}

/// The TLS-cost table (issue #8): each Fetch version through PLAINTEXT and SSL side by side, from
/// the same run, for every setting that has SSL passes. Nothing when the run had no SSL.
fn tls_table(md: &mut String, results: &[SettingResult]) {
    let with_ssl: Vec<Setting> = settings_in_order(results)
        .into_iter()
        .filter(|&setting| {
            VERSIONS.iter().any(|&version| {
                security_pass_spread(results, setting, version, SecurityProtocol::Ssl).is_some()
            })
        })
        .collect();
    if with_ssl.is_empty() {
        return;
    }
    md.push_str(
        "### TLS cost (PLAINTEXT and SSL listeners of the same broker, same run)

",
    );
    md.push_str(
        "MB/s (min–max, passes); SSL ÷ PLAINTEXT of the medians. The client is rustls (ring \
         provider) trusting a certificate the bench generated for the run.\n\n| setting |",
    );
    for version in VERSIONS {
        let label = version_label(version);
        let _ = write!(md, " {label} PLAINTEXT | {label} SSL | SSL ÷ PLAINTEXT |");
    }
    md.push_str("\n|---|");
    for _ in VERSIONS {
        md.push_str("---|---|---|");
    }
    md.push('\n');
    for setting in with_ssl {
        let _ = write!(md, "| {} |", setting.label());
        for version in VERSIONS {
            let plain =
                security_pass_spread(results, setting, version, SecurityProtocol::Plaintext);
            let ssl = security_pass_spread(results, setting, version, SecurityProtocol::Ssl);
            let ratio = match (plain, ssl) {
                (Some(plain), Some(ssl)) => percent(ssl, plain),
                _ => "—".to_owned(),
            };
            let _ = write!(
                md,
                " {} | {} | {ratio} |",
                cell(plain, None),
                cell(ssl, None)
            );
        }
        md.push('\n');
    }
    md.push('\n');
}

fn settings_in_order(results: &[SettingResult]) -> Vec<Setting> {
    let mut settings: Vec<Setting> = Vec::new();
    for result in results {
        if !settings.contains(&result.setting) {
            settings.push(result.setting);
        }
    }
    settings
}

/// `part`'s median as a whole percentage of `whole`'s, e.g. `"88 %"`.
fn percent(part: Spread, whole: Spread) -> String {
    format!("{:.0} %", 100.0 * part.median / whole.median)
}

fn cell(spread: Option<Spread>, baseline: Option<Spread>) -> String {
    match spread {
        None => "—".to_owned(),
        Some(spread) => {
            let mut text = format!(
                "{:.0} ({:.0}–{:.0}, n={})",
                spread.median / MB,
                spread.min / MB,
                spread.max / MB,
                spread.count
            );
            if let Some(baseline) = baseline {
                let _ = write!(text, " = {}", percent(spread, baseline));
            }
            text
        }
    }
}

/// One line of the machine and its load, for every report's header.
pub fn machine_line(machine: &Machine) -> String {
    format!(
        "{} CPUs ({}), {:.1} GiB memory, load average {:.1}",
        machine.cpu_count,
        machine.cpu_model,
        machine.memory_bytes as f64 / (1024.0 * MIB),
        machine.load_average_1m
    )
}

fn run_header(out: &mut String, record: &RunRecord) {
    let _ = writeln!(out, "- date: {}", format_utc(record.started_unix_seconds));
    let _ = writeln!(out, "- command: `{}`", record.command);
    let _ = writeln!(
        out,
        "- machine before: {}",
        machine_line(&record.machine_before)
    );
    let _ = writeln!(
        out,
        "- load after: {:.1}",
        record.machine_after.load_average_1m
    );
    out.push('\n');
}

/// The `sendfile` baselines of a baseline run (`--sendfile-file-mib`, `--turns`), each as a
/// fraction of the plain one (`plain`), when they were measured.
fn sendfile_baselines(out: &mut String, record: &RunRecord, plain: Spread) {
    let streamed = outcomes_spread(&record.baseline_sendfile);
    if let Some(streamed) = streamed {
        let _ = writeln!(
            out,
            "The same blocks sent with `sendfile` from a file larger than the caches, as a broker \
             serves modern fetches: **{}** MB/s, {} of the plain baseline.\n",
            cell(Some(streamed), None),
            percent(streamed, plain)
        );
    }
    if let Some(turns) = outcomes_spread(&record.baseline_sendfile_turns) {
        let mut text = format!(
            "`sendfile` taking turns as one Fetch in flight does (a small request before each \
             block): **{}** MB/s, {} of the plain baseline",
            cell(Some(turns), None),
            percent(turns, plain)
        );
        if let Some(streamed) = streamed {
            let _ = write!(
                text,
                "; {} of `sendfile` streaming",
                percent(turns, streamed)
            );
        }
        let _ = writeln!(out, "{text}.\n");
    }
}

/// Renders the report from whatever records exist.
pub fn render(inputs: &Inputs) -> Result<Rendered, PlotError> {
    let mut md = String::new();
    md.push_str("# KIP-283 measurements on Skiff\n\n");
    md.push_str(
        "Produced by `skiff-bench` (see docs/benchmarks.md). Figures are medians with \
         (min–max, sample count); the machine is shared with other builds, so the load average is \
         given with every run. MB = 10⁶ bytes, MiB = 2²⁰ bytes. Throughput counts response bytes on \
         the wire.\n\n",
    );
    let baseline = baseline_spread(inputs);
    md.push_str("## Raw loopback baseline\n\n");
    match (&inputs.baseline, baseline) {
        (Some(record), Some(spread)) => {
            run_header(&mut md, record);
            let _ = writeln!(
                md,
                "A plain TCP socket pair on 127.0.0.1 (sender thread writing 12 MiB blocks from memory, \
                 receiver reading them into one reused buffer {} KiB at a time, as the consumer \
                 reads): **{}** MB/s.\n",
                crate::client::READ_PIECE_BYTES_MAX >> 10,
                cell(Some(spread), None)
            );
            sendfile_baselines(&mut md, record, spread);
        }
        _ => md.push_str("Not measured.\n\n"),
    }
    let mut throughput_svg = None;
    md.push_str(
        "## Throughput (one consumer, 1 kB messages, 12 partitions unless the command says `--partitions`)\n\n",
    );
    if let Some(record) = &inputs.throughput {
        run_header(&mut md, record);
        if record.truncated {
            md.push_str("The run hit its time cap before every setting was measured.\n\n");
        }
        let results = &record.throughput;
        md.push_str(
            "MB/s (min–max, passes) = fraction of the loopback baseline; PLAINTEXT listener.\n\n",
        );
        md.push_str("| setting | produce |");
        for version in VERSIONS {
            let _ = write!(md, " {} |", version_label(version));
        }
        md.push_str(" legacy ÷ modern (v2→v1, v2→v0) |\n|---|---|");
        for _ in VERSIONS {
            md.push_str("---|");
        }
        md.push_str("---|\n");
        for setting in settings_in_order(results) {
            let produce: Vec<f64> = results
                .iter()
                .filter(|result| result.setting == setting)
                .map(|result| result.produce.bytes_per_second())
                .collect();
            let _ = write!(
                md,
                "| {} | {} |",
                setting.label(),
                cell(Spread::of(&produce), None)
            );
            for version in VERSIONS {
                let _ = write!(
                    md,
                    " {} |",
                    cell(pass_spread(results, setting, version), baseline)
                );
            }
            let modern = pass_spread(results, setting, VERSIONS[0]);
            let ratio = |version: i16| match (pass_spread(results, setting, version), modern) {
                (Some(legacy), Some(modern)) => percent(legacy, modern),
                _ => "—".to_owned(),
            };
            let _ = writeln!(md, " {}, {} |", ratio(2), ratio(0));
        }
        md.push('\n');
        tls_table(&mut md, results);
        if let Some(modern) = modern_spread(results) {
            let mut line = format!(
                "Modern fetch over every setting: {} MB/s",
                cell(Some(modern), None)
            );
            if let Some(baseline) = baseline {
                let _ = write!(
                    line,
                    ", {} of the loopback baseline",
                    percent(modern, baseline)
                );
            }
            if let Some(sendfile) = sendfile_baseline_spread(inputs) {
                let _ = write!(
                    line,
                    ", {} of the `sendfile` one",
                    percent(modern, sendfile)
                );
            }
            let _ = writeln!(md, "{line}.\n");
        }
        let lazy: Vec<(usize, Setting)> = settings_in_order(results)
            .into_iter()
            .filter_map(|setting| match setting {
                Setting::Lazy { chunk_bytes } => Some((chunk_bytes, setting)),
                _ => None,
            })
            .collect();
        if let Some((best_chunk, best)) = lazy
            .iter()
            .filter_map(|(chunk, setting)| {
                let v1 = pass_spread(results, *setting, 2)?.median;
                let v0 = pass_spread(results, *setting, 0)?.median;
                Some((*chunk, v1 + v0))
            })
            .max_by(|a, b| a.1.total_cmp(&b.1))
        {
            let _ = writeln!(
                md,
                "Best chunk size here (highest sum of the v2→v1 and v2→v0 medians): **{} KiB** \
                 (sum {:.0} MB/s).\n",
                best_chunk >> 10,
                best / MB
            );
        }
        if !lazy.is_empty() {
            let mut series = Vec::new();
            for version in [2i16, 0] {
                series.push((
                    version_label(version),
                    lazy.iter()
                        .filter_map(|(chunk, setting)| {
                            let spread = pass_spread(results, *setting, version)?;
                            Some(((*chunk as f64 / 1024.0).log2(), spread.median / MB))
                        })
                        .collect::<Vec<_>>(),
                ));
            }
            let x_range = lazy
                .iter()
                .map(|(chunk, _)| (*chunk as f64 / 1024.0).log2())
                .fold((f64::MAX, f64::MIN), |(lo, hi), x| (lo.min(x), hi.max(x)));
            let mut flat = Vec::new();
            for version in [2i16, 0] {
                if let Some(spread) = pass_spread(results, Setting::Eager, version) {
                    flat.push((
                        format!("eager {}", version_label(version)),
                        spread.median / MB,
                    ));
                }
            }
            if let Some(modern) = modern_spread(results) {
                flat.push(("modern (Fetch v4)".to_owned(), modern.median / MB));
            }
            if let Some(baseline) = baseline {
                flat.push(("loopback baseline".to_owned(), baseline.median / MB));
            }
            for (label, y) in flat {
                series.push((label, vec![(x_range.0, y), (x_range.1, y)]));
            }
            throughput_svg = Some(line_chart(
                "Fetch throughput against down-conversion chunk size",
                "chunk size, log2(KiB) (4 = 16 KiB, 7 = 128 KiB, 10 = 1 MiB)",
                "MB/s",
                &series,
            )?);
            let _ = writeln!(md, "![throughput against chunk size]({THROUGHPUT_SVG})\n");
        }
        md.push_str(
            "KIP-283's own table (Kafka 2.0, MB/s): 16 kB 136.95; 32 kB 167.04; 64 kB 181.92; \
             128 kB 197.72; 256 kB 181.25; 512 kB 180.41; 1 MB 176.64; unchunked 178.9.\n\n",
        );
    } else {
        md.push_str("Not measured.\n\n");
    }
    let mut rss_svg = None;
    md.push_str("## Memory (C slow legacy consumers, 250 partitions, 250 MB fetches)\n\n");
    if let Some(record) = &inputs.memory {
        run_header(&mut md, record);
        md.push_str(
            "| setting | C | messages | RSS before | peak RSS (sampled) | VmHWM | RssAnon before → peak | per response (RssAnon) | RssFile before → peak | capped | responses started | declared | read |\n\
             |---|---|---|---|---|---|---|---|---|---|---|---|---|\n",
        );
        let mut series = Vec::new();
        for result in &record.memory {
            let _ = writeln!(
                md,
                "| {} | {} | {} | {:.0} MiB | {:.0} MiB | {} | {} | {} | {} | {} | {} | {:.0} MB | {:.0} MB |",
                result.setting.label(),
                result.spec.consumer_count,
                result.produce.record_count,
                result.rss_before_bytes as f64 / MIB,
                result.rss_peak_sampled_bytes as f64 / MIB,
                result.hwm_bytes.map_or("killed".to_owned(), |hwm| format!(
                    "{:.0} MiB",
                    hwm as f64 / MIB
                )),
                before_to_peak(result.anon_before_bytes, result.anon_peak_sampled_bytes),
                result
                    .anon_growth_per_response_bytes()
                    .map_or("–".to_owned(), |bytes| format!("{} KiB", bytes / 1024)),
                before_to_peak(result.file_before_bytes, result.file_peak_sampled_bytes),
                result.capped_at_ms.map_or("no".to_owned(), |at| format!(
                    "at {:.1} s (cap {:.0} MiB)",
                    at as f64 / 1000.0,
                    result.spec.rss_cap_bytes as f64 / MIB
                )),
                result.responses_started,
                result.response_bytes_declared as f64 / MB,
                result.bytes_read as f64 / MB,
            );
            series.push((
                format!(
                    "{} (C={})",
                    result.setting.label(),
                    result.spec.consumer_count
                ),
                result
                    .samples
                    .iter()
                    .map(|sample| (sample.at_ms as f64 / 1000.0, sample.rss_bytes as f64 / MIB))
                    .collect::<Vec<_>>(),
            ));
        }
        md.push('\n');
        if !series.is_empty() {
            rss_svg = Some(line_chart(
                "Broker RSS while C slow legacy consumers read",
                "seconds since the consumers started",
                "RSS, MiB",
                &series,
            )?);
            let _ = writeln!(md, "![RSS over time]({RSS_SVG})\n");
        }
    } else {
        md.push_str("Not measured.\n\n");
    }
    Ok(Rendered {
        markdown: md,
        throughput_svg,
        rss_svg,
    })
}

/// "a → b MiB" for a before/peak pair, or "–" for records written before it was sampled.
fn before_to_peak(before: u64, peak: u64) -> String {
    if peak == 0 {
        return "–".to_owned();
    }
    format!("{:.1} → {:.1} MiB", before as f64 / MIB, peak as f64 / MIB)
}

/// Why a chart could not be drawn (plotters' error on the SVG backend, with its own text).
pub type PlotError = DrawingAreaErrorKind<std::io::Error>;

/// Line colours of every skiff-bench plot, in series order.
pub const PALETTE: [RGBColor; 7] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(127, 127, 127),
];

/// A line chart of named series as an SVG string; x and y ranges fit the data.
pub fn line_chart(
    title: &str,
    x_label: &str,
    y_label: &str,
    series: &[(String, Vec<(f64, f64)>)],
) -> Result<String, PlotError> {
    let points = || series.iter().flat_map(|(_, points)| points.iter());
    let x_min = points().map(|p| p.0).fold(f64::MAX, f64::min);
    let x_max = points().map(|p| p.0).fold(f64::MIN, f64::max);
    let y_max = points().map(|p| p.1).fold(1.0, f64::max) * 1.15;
    let (x_min, x_max) = if x_min < x_max {
        (x_min, x_max)
    } else {
        (0.0, 1.0)
    };
    let palette = PALETTE;
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (900, 500)).into_drawing_area();
        root.fill(&WHITE)?;
        let mut chart = ChartBuilder::on(&root)
            .caption(title, ("sans-serif", 20))
            .margin(12)
            .x_label_area_size(45)
            .y_label_area_size(70)
            .build_cartesian_2d(x_min..x_max, 0.0..y_max)?;
        chart
            .configure_mesh()
            .x_desc(x_label)
            .y_desc(y_label)
            .draw()?;
        for (index, (label, points)) in series.iter().enumerate() {
            let color = palette[index % palette.len()];
            chart
                .draw_series(LineSeries::new(
                    points.iter().copied(),
                    color.stroke_width(2),
                ))?
                .label(label.as_str())
                .legend(move |(x, y)| {
                    PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(2))
                });
        }
        chart
            .configure_series_labels()
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK)
            .position(SeriesLabelPosition::LowerRight)
            .draw()?;
        root.present()?;
    }
    Ok(svg)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kip283::produce::ProduceOutcome;
    use crate::kip283::throughput::VersionResult;

    fn pass(bytes_per_second: f64) -> PassOutcome {
        PassOutcome {
            record_count: 1,
            response_bytes: bytes_per_second as u64,
            seconds: 1.0,
        }
    }

    fn result(setting: Setting, v4: f64, v2: f64, v0: f64) -> SettingResult {
        SettingResult {
            setting,
            repetition: 0,
            produce: ProduceOutcome {
                record_count: 1,
                batch_bytes: 100_000_000,
                seconds: 1.0,
            },
            versions: [(4, v4), (2, v2), (0, v0)]
                .into_iter()
                .map(|(version, speed)| VersionResult {
                    version,
                    security: SecurityProtocol::Plaintext,
                    verified: pass(1.0),
                    passes: vec![pass(speed), pass(speed * 1.1)],
                })
                .collect(),
        }
    }

    /// `result` plus SSL passes at `ssl_fraction` of each PLAINTEXT speed.
    fn result_with_ssl(setting: Setting, speeds: [f64; 3], ssl_fraction: f64) -> SettingResult {
        let mut result = result(setting, speeds[0], speeds[1], speeds[2]);
        let ssl: Vec<VersionResult> = result
            .versions
            .iter()
            .map(|plain| VersionResult {
                security: SecurityProtocol::Ssl,
                passes: plain
                    .passes
                    .iter()
                    .map(|p| pass(p.bytes_per_second() * ssl_fraction))
                    .collect(),
                ..plain.clone()
            })
            .collect();
        result.versions.extend(ssl);
        result
    }

    fn machine() -> Machine {
        Machine {
            cpu_count: 2,
            cpu_model: "test".to_owned(),
            memory_bytes: 1 << 30,
            load_average_1m: 1.0,
        }
    }

    /// A throughput run's record, with no memory or baseline figures.
    fn throughput_record(command: &str, throughput: Vec<SettingResult>) -> RunRecord {
        RunRecord {
            command: command.to_owned(),
            started_unix_seconds: 0,
            machine_before: machine(),
            machine_after: machine(),
            throughput,
            truncated: false,
            memory: Vec::new(),
            baseline: Vec::new(),
            baseline_sendfile: Vec::new(),
            baseline_sendfile_turns: Vec::new(),
        }
    }

    #[test]
    fn tls_passes_get_their_own_table_and_stay_out_of_the_plaintext_figures() {
        let setting = Setting::Lazy {
            chunk_bytes: 128 << 10,
        };
        let record = throughput_record(
            "skiff-bench throughput --security plaintext,ssl",
            vec![result_with_ssl(setting, [2e9, 1e9, 8e8], 0.5)],
        );
        let results = &record.throughput;
        // PLAINTEXT figures are what they were without the SSL passes.
        let plain = pass_spread(results, setting, 2).expect("plaintext");
        assert!((plain.median - 1.05e9).abs() < 1.0, "{}", plain.median);
        let modern = modern_spread(results).expect("modern");
        assert!((modern.median - 2.1e9).abs() < 1.0, "{}", modern.median);
        let inputs = Inputs {
            throughput: Some(record),
            memory: None,
            baseline: None,
        };
        let markdown = render(&inputs).expect("render").markdown;
        assert!(markdown.contains("### TLS cost"), "{markdown}");
        assert!(
            markdown.contains(
                "| lazy 128 KiB | 2100 (2000–2200, n=2) | 1050 (1000–1100, n=2) | 50 % |"
            ),
            "{markdown}"
        );
    }

    #[test]
    fn a_run_without_ssl_has_no_tls_table() {
        let record = throughput_record(
            "skiff-bench throughput",
            vec![result(Setting::Eager, 2e9, 1e9, 1e9)],
        );
        let inputs = Inputs {
            throughput: Some(record),
            memory: None,
            baseline: None,
        };
        assert!(!render(&inputs)
            .expect("render")
            .markdown
            .contains("TLS cost"));
    }

    #[test]
    fn report_names_the_best_chunk_and_plots_it() {
        let machine = Machine {
            cpu_count: 2,
            cpu_model: "test".to_owned(),
            memory_bytes: 1 << 30,
            load_average_1m: 1.0,
        };
        let record = RunRecord {
            command: "skiff-bench throughput".to_owned(),
            started_unix_seconds: 0,
            machine_before: machine.clone(),
            machine_after: machine,
            throughput: vec![
                result(
                    Setting::Lazy {
                        chunk_bytes: 16 << 10,
                    },
                    2e9,
                    1e9,
                    1e9,
                ),
                result(
                    Setting::Lazy {
                        chunk_bytes: 64 << 10,
                    },
                    2e9,
                    1.5e9,
                    1.4e9,
                ),
                result(Setting::Eager, 2e9, 1.2e9, 1.2e9),
            ],
            truncated: false,
            memory: Vec::new(),
            baseline: vec![BaselineOutcome {
                bytes: 4_200_000_000,
                seconds: 1.0,
            }],
            baseline_sendfile: Vec::new(),
            baseline_sendfile_turns: Vec::new(),
        };
        let inputs = Inputs {
            throughput: Some(record.clone()),
            memory: None,
            baseline: Some(record),
        };
        let rendered = render(&inputs).unwrap();
        assert!(
            rendered.markdown.contains("**64 KiB**"),
            "{}",
            rendered.markdown
        );
        assert!(rendered.markdown.contains("| lazy 16 KiB |"));
        assert!(
            rendered.markdown.contains("= 50 %"),
            "modern 2.1 GB/s of a 4.2 GB/s baseline"
        );
        assert!(rendered.throughput_svg.unwrap().contains("<svg"));
        assert!(rendered.rss_svg.is_none());
    }

    #[test]
    fn sendfile_baselines_are_shown_as_fractions_of_the_plain_one_and_of_each_other() {
        let outcome = |bytes_per_second: f64| BaselineOutcome {
            bytes: bytes_per_second as u64,
            seconds: 1.0,
        };
        // One record standing for both runs, throughput and baseline.
        let record = RunRecord {
            baseline: vec![outcome(4.2e9)],
            baseline_sendfile: vec![outcome(3.0e9)],
            baseline_sendfile_turns: vec![outcome(2.7e9)],
            ..throughput_record(
                "skiff-bench baseline --sendfile-file-mib 800 --turns",
                vec![result(Setting::Eager, 2e9, 1e9, 1e9)],
            )
        };
        let inputs = Inputs {
            throughput: Some(record.clone()),
            memory: None,
            baseline: Some(record),
        };
        let markdown = render(&inputs).expect("render").markdown;
        assert!(
            markdown.contains("**3000 (3000–3000, n=1)** MB/s, 71 % of the plain baseline."),
            "{markdown}"
        );
        assert!(
            markdown.contains(
                "**2700 (2700–2700, n=1)** MB/s, 64 % of the plain baseline; 90 % of `sendfile` \
                 streaming."
            ),
            "{markdown}"
        );
        // Modern fetch at 2.1 GB/s: half the plain baseline, 70 % of the `sendfile` one.
        assert!(
            markdown.contains(
                "Modern fetch over every setting: 2100 (2000–2200, n=2) MB/s, 50 % of the \
                 loopback baseline, 70 % of the `sendfile` one."
            ),
            "{markdown}"
        );
    }
}
