//! `skiff-placement-sim`: runs the placement simulator (Sim A: replica placement, Sim B: bundles
//! and shedding) and writes `placement.md` and `placement-*.svg` into the output directory.
//!
//! Usage: `skiff-placement-sim [--seed N] [--quick] [--only replica|bundles|targets] [--out DIR]`
//! (default seed 1, output `bench/reports`, or `bench/reports/placement-quick` with `--quick`; the
//! committed report runs every part and ends with the table of docs/design/placement.md §3.3b's
//! targets). Seeded and deterministic: the same seed writes the same bytes. The full run takes
//! minutes, so CI checks the quick one: `scripts/test.sh` runs `--seed 1 --quick` and compares what
//! it writes with the committed `bench/reports/placement-quick/` byte for byte.

use std::path::PathBuf;

use anyhow::{bail, Context};
use skiff_placement_sim as placement_sim;

fn main() -> anyhow::Result<()> {
    let mut options = placement_sim::Options {
        seed: 1,
        quick: false,
        replica: true,
        bundles: true,
        targets: true,
    };
    let mut out = None;
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--seed" => {
                let value = args.next().context("--seed needs a value")?;
                options.seed = value.parse().context("--seed must be an integer")?;
            }
            "--quick" => options.quick = true,
            "--only" => {
                let only = args.next();
                options.replica = only.as_deref() == Some("replica");
                options.bundles = only.as_deref() == Some("bundles");
                options.targets = only.as_deref() == Some("targets");
                if !(options.replica || options.bundles || options.targets) {
                    bail!("--only takes replica, bundles or targets");
                }
            }
            "--out" => {
                out = Some(PathBuf::from(
                    args.next().context("--out needs a directory")?,
                ))
            }
            "-h" | "--help" => {
                println!(
                    "skiff-placement-sim [--seed N] [--quick] [--only replica|bundles|targets] [--out DIR]"
                );
                return Ok(());
            }
            other => bail!("unknown argument {other}"),
        }
    }
    // The quick report has its own directory, so a quick run never overwrites the full report.
    let out = out.unwrap_or_else(|| {
        let reports = PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../reports"));
        if options.quick {
            reports.join("placement-quick")
        } else {
            reports
        }
    });
    let output = placement_sim::run(&options);
    std::fs::create_dir_all(&out).with_context(|| format!("creating {}", out.display()))?;
    let report = out.join("placement.md");
    std::fs::write(&report, &output.markdown)
        .with_context(|| format!("writing {}", report.display()))?;
    for (name, svg) in &output.plots {
        let path = out.join(name);
        std::fs::write(&path, svg).with_context(|| format!("writing {}", path.display()))?;
    }
    print!("{}", output.markdown);
    eprintln!(
        "wrote {} and {} plots",
        report.display(),
        output.plots.len()
    );
    Ok(())
}
