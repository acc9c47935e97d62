#!/usr/bin/env bash
# Runs every fuzz target (fuzz/Cargo.toml's [[bin]]s) for SECONDS each, one at a time with one job
# (the machine is shared), starting from the committed corpus in fuzz/corpus/<target>/, and prints
# each target's executions, executions per second, coverage and crashes from libFuzzer's output.
# New inputs the run finds go to a scratch corpus, not to the committed one.
#
#   scripts/fuzz.sh SECONDS [TARGET...]      (needs `cargo install cargo-fuzz` and a nightly)
#
# SKIFF_FUZZ_RUNS=N also stops each target after N executions (whichever comes first), e.g.
# `SKIFF_FUZZ_RUNS=10000000 scripts/fuzz.sh 7200` for the 10 M executions or 2 hours per target.
# SKIFF_FUZZ_CPU_SECONDS=N stops each target gracefully (SIGUSR1: libFuzzer prints its figures and
# exits 0) once its process has used N seconds of CPU, for the "2 CPU-hours" of the slow targets:
# wall time says little on a shared machine, e.g. under `chrt --idle 0` beside other work.
# SKIFF_FUZZ_NO_BUILD=1 skips the build step and runs the binaries already built.
#
# Exits non-zero if any target crashed; the crashing input is in fuzz/artifacts/<target>/.
set -euo pipefail
cd "$(dirname "$0")/.."

seconds="${1:?usage: scripts/fuzz.sh SECONDS [TARGET...]}"
shift
if [ "$#" -gt 0 ]; then
  targets=("$@")
else
  mapfile -t targets < <(cargo +nightly fuzz list --fuzz-dir fuzz)
fi

logs="$(mktemp -d)"
# Debug assertions on: the crates assert their invariants in debug builds.
if [ -z "${SKIFF_FUZZ_NO_BUILD:-}" ]; then
  cargo +nightly fuzz build --fuzz-dir fuzz --debug-assertions >/dev/null
fi
runs=()
if [ -n "${SKIFF_FUZZ_RUNS:-}" ]; then
  runs=(-runs="$SKIFF_FUZZ_RUNS")
fi
bin_dir="$PWD/fuzz/target/$(rustc +nightly -vV | sed -n 's/^host: //p')/release"
# A running process's CPU seconds (user + system: /proc/PID/stat's fields 14 and 15); fails once
# it has exited (a zombie waiting for `wait` still has a stat file).
clock_ticks=$(getconf CLK_TCK)
cpu_seconds() {
  local stat fields
  stat=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
  stat=${stat##*) }
  read -r -a fields <<<"$stat"
  [ "${fields[0]}" != Z ] || return 1
  echo $(((fields[11] + fields[12]) / clock_ticks))
}
printf '%-20s %12s %8s %8s %8s %7s %s\n' target executions exec/s cov ft cpu_s crashes
failed=0
for target in "${targets[@]}"; do
  scratch="$logs/corpus-$target"
  mkdir -p "fuzz/artifacts/$target"
  corpus="$PWD/fuzz/corpus/$target"
  mkdir -p "$scratch"
  log="$logs/$target.log"
  status=0
  # The binaries built above, run directly: `cargo fuzz run` would rebuild first if a source
  # changed meanwhile, and the targets of one run would then test different code. One process,
  # no -jobs: with -jobs libFuzzer moves its output (and the figures) to fuzz-N.log.
  "$bin_dir/$target" "$scratch" "$corpus" -max_total_time="$seconds" "${runs[@]}" -print_final_stats=1 \
    -artifact_prefix="$PWD/fuzz/artifacts/$target/" >"$log" 2>&1 &
  pid=$!
  used=0
  while now=$(cpu_seconds "$pid"); do
    used=$now
    if [ -n "${SKIFF_FUZZ_CPU_SECONDS:-}" ] && [ "$used" -ge "$SKIFF_FUZZ_CPU_SECONDS" ]; then
      kill -USR1 "$pid" 2>/dev/null || true
      break
    fi
    sleep 2
  done
  wait "$pid" || status=$?
  executions=$(grep -oE '^stat::number_of_executed_units: *[0-9]+' "$log" | grep -oE '[0-9]+$' | tail -1)
  rate=$(grep -oE '^stat::average_exec_per_sec: *[0-9]+' "$log" | grep -oE '[0-9]+$' | tail -1)
  cov=$(grep -oE 'cov: [0-9]+' "$log" | tail -1 | grep -oE '[0-9]+')
  ft=$(grep -oE 'ft: [0-9]+' "$log" | tail -1 | grep -oE '[0-9]+')
  crashes=0
  if [ "$status" -ne 0 ]; then
    crashes=1
    failed=1
    echo "--- $target failed (exit $status), log: $log" >&2
    grep -E 'panicked|SUMMARY|Test unit written' "$log" >&2 || true
  fi
  printf '%-20s %12s %8s %8s %8s %7s %s\n' "$target" "${executions:-?}" "${rate:-?}" "${cov:-?}" "${ft:-?}" \
    "$used" "$crashes"
done
echo "logs: $logs"
exit "$failed"
