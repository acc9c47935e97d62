#!/usr/bin/env bash
# Runs every Skiff test on a fresh Debian machine with the Rust toolchain: installs the real
# clients it needs when they are missing, then formatting, lints, unit/property/integration tests,
# the fuzz corpus replay, the benchmark build, the real-client suite against a release broker and
# the Jepsen-style queue checks (tests/jepsen).
set -euo pipefail
cd "$(dirname "$0")/.."

step() { printf '\n=== %s\n' "$*"; }

# A fresh clone (CI) gains nothing from incremental compilation: its caches only take disk (a
# debug build's would be several GiB; a CI run once failed with "No space left on device").
if [ -n "${CI:-}" ]; then
  export CARGO_INCREMENTAL=0
fi
# What the build has to work with, printed so a failed run shows it.
df -h "${CARGO_TARGET_DIR:-$PWD}" | tail -n 1 | awk '{print "disk free for the build: " $4 " of " $2}'

step "installing real clients if missing"
scripts/install-clients.sh

step "installing protoc and etcd if missing"
scripts/install-cluster.sh

step "cargo fmt"
cargo fmt --all -- --check
# The fuzz crate is its own workspace (cargo fuzz builds it with sanitizer flags): checked apart.
cargo fmt --manifest-path fuzz/Cargo.toml -- --check

step "cargo clippy"
cargo clippy --workspace --all-targets -- -D warnings
cargo clippy -p skiff-meta --all-targets --features etcd -- -D warnings
# The fuzz crate shares the workspace's target directory here (not under cargo fuzz, whose
# sanitizer builds keep fuzz/target): the crates both use are built once, not twice.
target_dir="${CARGO_TARGET_DIR:-$(pwd)/target}"
cargo clippy --manifest-path fuzz/Cargo.toml --target-dir "$target_dir" --all-targets -- -D warnings

step "sans-IO checks"
if grep -rnE 'std::(net|fs)|Instant::now|SystemTime::now' protocol/src; then
  echo "skiff-protocol must not touch files, sockets or clocks"; exit 1
fi
for pure in skiff-protocol skiff-placement skiff-group; do
  if cargo tree -p "$pure" -e normal --prefix none | grep -E '^(tokio|mio|memmap2|socket2|rustls) '; then
    echo "$pure must not depend on IO crates"; exit 1
  fi
done
if grep -rnE 'tokio::|Instant::now|SystemTime::now|std::(fs|net)' placement/src; then
  echo "skiff-placement must be pure"; exit 1
fi
# The simulator drives skiff-placement alone: no broker, no tokio.
if cargo tree -p skiff-placement-sim -e normal --prefix none | grep -E '^(skiff-broker|tokio) '; then
  echo "skiff-placement-sim must depend on skiff-placement only"; exit 1
fi
# skiff-bench is a client: it runs the broker as a binary (--skiff-bin), never links it.
if cargo tree -p skiff-bench -e normal --prefix none | grep -E '^skiff-broker '; then
  echo "skiff-bench must not depend on skiff-broker"; exit 1
fi
# The group coordinator (skiff-group) is pure: only the broker's group/driver.rs touches tokio,
# files and time. It cannot reach into the broker either: skiff-broker would bring tokio into the
# cargo tree check above.
if grep -rnE 'tokio::|Instant::now|SystemTime::now|std::(fs|net)' group/src; then
  echo "skiff-group must be pure"; exit 1
fi
# The transaction coordinator (skiff-txn) is pure in the same way: broker/src/txn/ is its edge.
if grep -rnE 'tokio::|Instant::now|SystemTime::now|std::(fs|net)' txn/src; then
  echo "skiff-txn must be pure"; exit 1
fi
if cargo tree -p skiff-txn -e normal --prefix none | grep -E '^(skiff-broker|tokio) '; then
  echo "skiff-txn must not depend on the broker or tokio"; exit 1
fi
if grep -rnE 'tokio::|Instant::now|SystemTime::now|std::(fs|net)' meta/src/core; then
  echo "the metadata store core must be pure"; exit 1
fi
# The cluster core (layout, image, controller, session fence) is pure: the broker's cluster/
# module submits its Txns and passes the clock in.
if grep -rnE 'tokio::|Instant::now|SystemTime::now|std::(fs|net)|LocalStore|EtcdStore|MetaStore::' cluster/src; then
  echo "skiff-cluster must be pure"; exit 1
fi

# The broker's folders import each other without a cycle, and handlers share code only through
# handlers/common/ (a text scan of `crate::`, `super::` and `self::` paths); the self-test shows
# the check fails on a made-up cycle first.
python3 scripts/import-cycles.py --self-test
python3 scripts/import-cycles.py broker/src

# Every Markdown path the source and docs mention is a file of the repository, and every
# section mark after one (`docs/design/cluster.md §3`) a heading of that document.
python3 scripts/doc-references.py --self-test
python3 scripts/doc-references.py

# The library crates' functions stay at most 70 lines: the ones longer when the limit came are
# listed in scripts/function-lengths.allow and may shrink, never grow; any other fails.
python3 scripts/function-lengths.py --self-test
python3 scripts/function-lengths.py

step "unit, property and integration tests"
if command -v cargo-nextest >/dev/null 2>&1; then
  cargo nextest run --workspace --no-fail-fast
else
  cargo test --workspace --no-fail-fast
fi
cargo test --workspace --doc
# The etcd backend against a real 3-member etcd on loopback (about 10 s beyond the build).
cargo test -p skiff-meta --features etcd

step "fuzz corpus replay"
cargo test --manifest-path fuzz/Cargo.toml --target-dir "$target_dir"

# CI runs on the submitting machine's disk, shared with whatever else it holds: a run once stopped
# in the real-client suite with "No space left on device". Nothing after this point reads the
# debug build (the suites below run the release binaries), so a CI run gives its several GiB back
# before the release build; a developer's warm target keeps them.
if [ -n "${CI:-}" ]; then
  rm -rf "$target_dir/debug"
  df -h "$target_dir" | tail -n 1 | awk '{print "disk free after dropping the debug build: " $4}'
fi

step "release build: the broker (with etcd), skiff-bench and every benchmark"
# One optimized build for all three (a separate `cargo bench --no-run` would build every crate a
# second time with other features). The release broker has etcd support compiled in: the cluster
# tests (tests/clients/test_cluster*.py, test_replication*.py) run it against a real etcd. The
# README's first command builds without it (no protoc needed).
cargo build --release --workspace --bins --benches --features skiff-broker/etcd

step "skiff-bench smoke against a release broker"
"$target_dir"/release/skiff-bench smoke --skiff-bin "$target_dir"/release/skiff

step "skiff-bench cpu --smoke: broker CPU per GB beside the floors (printed, never failing on noise)"
"$target_dir"/release/skiff-bench cpu --smoke --skiff-bin "$target_dir"/release/skiff

step "cpu-per-gb.sh on a Skiff cluster of 3, short: the replicated paths end to end (about 15 s)"
# RF 1, 2 and 3 on a one-member etcd, 12 MB a phase: fails if a phase or the report does, never
# on the figures. The peers (Kafka) stay out: CI has no Kafka installed.
cpu_smoke_work=$(mktemp -d)
cpu_smoke_report=cpu-smoke
CARGO_TARGET_DIR="$target_dir" PEERS_SKIP_BUILD=1 PEERS_WORK="$cpu_smoke_work" CPU_BROKERS= \
  CPU_CLUSTER_BROKERS=skiff CPU_ROUNDS=1 CPU_FETCH_GB=0.2 CPU_RECORDS_PER_PARTITION=1024 \
  CPU_REPORT="$cpu_smoke_report" bench/scripts/cpu-per-gb.sh
grep -q "replication's added cost, RF 3" "bench/reports/$cpu_smoke_report.md"
rm -rf "$cpu_smoke_work" "bench/reports/$cpu_smoke_report.md" "bench/reports/data/$cpu_smoke_report"

step "placement simulator: its quick run writes bench/reports/placement-quick/ byte for byte"
# The committed reports are what the code writes. The full run (bench/reports/placement.md) takes
# minutes; the quick one (same code, small configurations, under a second) catches a change that
# moves the figures without regenerating them.
placement_quick=$(mktemp -d)
"$target_dir"/release/skiff-placement-sim --seed 1 --quick --out "$placement_quick" >/dev/null 2>&1
if ! diff -r bench/reports/placement-quick "$placement_quick" >/dev/null; then
  diff -u bench/reports/placement-quick/placement.md "$placement_quick/placement.md" || true
  echo "the placement simulator's report moved: regenerate both with"
  echo "  cargo run --release -p skiff-placement-sim -- --seed 1 [--quick]"
  echo "and say in the commit why the figures changed"; exit 1
fi
rm -rf "$placement_quick"

step "live placement benchmark's own checks (minimal moves, layout, ping-pong rules)"
python3 bench/scripts/placement_live.py --self-test

step "real clients and the Jepsen-style checks against a release broker"
SKIFF_BIN="$target_dir/release/skiff"
export SKIFF_BIN
# Two test files at a time (pytest-xdist, one file per worker): most cluster tests wait on
# timeouts (sessions, elections), and every test starts its own brokers, etcd and JVMs on free
# ports, so files do not share state. The Jepsen-style queue checks (tests/jepsen: synthetic
# histories, then a short run under faults) join the same run.
python3 -m pytest tests/clients tests/jepsen -n 2 --dist loadfile -q -rxX --durations=10 \
  -p no:cacheprovider -W ignore::DeprecationWarning
