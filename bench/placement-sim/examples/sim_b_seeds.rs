//! Sim B's pair shedders on five seeds from `--seed N` (default 1), printed as the per-seed
//! figures behind targets B1–B5, without Sim A (which the targets section also runs): a quick
//! check while working on the shedder. `cargo run --release -p skiff-placement-sim --example
//! sim_b_seeds -- 6` runs seeds 6–10.

use skiff_placement_sim::bundles::{BundleConfig, Scenario};
use skiff_placement_sim::targets::{moves_against_avg, run_seeds};

fn main() {
    let seed = std::env::args()
        .nth(1)
        .map_or(1, |s| s.parse().expect("a seed"));
    let seeds = run_seeds(&BundleConfig::standard(seed));
    for s in &seeds {
        for (scenario, avg, skiff) in &s.runs {
            println!(
                "seed {} {:16} avg {:3} ({:>5}, pp {}) skiff {:3} ({:>5}, pp {}, uphill {}, splits {}){}",
                s.seed,
                scenario.name(),
                avg.moves,
                avg.converge_cycles.map_or("never".to_owned(), |c| c.to_string()),
                avg.ping_pong,
                skiff.moves,
                skiff.converge_cycles.map_or("never".to_owned(), |c| c.to_string()),
                skiff.ping_pong,
                skiff.uphill,
                skiff.splits,
                if *scenario == Scenario::ScaleOut {
                    format!(" plan {:?}", skiff.move_bounds.last().and_then(|b| b.greedy))
                } else {
                    String::new()
                }
            );
        }
    }
    println!("seed | converged | ping-pong | B3 ratio | jitter | scale-out ratio");
    for s in &seeds {
        println!(
            "{} | {} | {} | {:.2} | {} | {:.2}",
            s.seed,
            s.converged(),
            s.ping_pong(),
            moves_against_avg(&s.move_pairs()),
            s.jitter_moves(),
            s.scale_out_ratio()
        );
    }
}
