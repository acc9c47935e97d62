#!/usr/bin/env bash
# Broker CPU per GB at 12 and at 1,000 partitions (issue 41), one or more skiff builds
# interleaved: bench/reports/cpu-partitions.md. Usage:
#   bench/scripts/cpu-partitions.sh OUT_DIR SKIFF_BIN [SKIFF_BIN ...]
# Each build runs, per repetition, 12 partitions x 16,384 records, 1,000 x 1,024 (the same 16 kB
# batches per partition) and 1,000 x 200 (the same 0.2 GB a round as 12 partitions), 2 rounds each.
set -euo pipefail
cd "$(dirname "$0")/../.."
out=$1; shift
bench=${SKIFF_BENCH:-target/release/skiff-bench}
mkdir -p "$out"
for repetition in 1 2; do
  for skiff in "$@"; do
    name=$(basename "$skiff")
    run() { nice -n 5 "$bench" cpu --skiff-bin "$skiff" --rounds 2 "$@"; }
    run --partitions 1000 --records-per-partition 200 --fetch-gb-min 0.5 --versions 4 \
      --out "$out/$name-p1000eq-$repetition.md" > "$out/$name-p1000eq-$repetition.log" 2>&1
    run --partitions 1000 --records-per-partition 1024 --fetch-gb-min 1 \
      --out "$out/$name-p1000-$repetition.md" > "$out/$name-p1000-$repetition.log" 2>&1
    run --partitions 12 --records-per-partition 16384 --fetch-gb-min 1 \
      --out "$out/$name-p12-$repetition.md" > "$out/$name-p12-$repetition.log" 2>&1
  done
done
echo "tables in $out/*.md"
