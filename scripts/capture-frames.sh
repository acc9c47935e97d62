#!/usr/bin/env bash
# Rebuilds the replay corpus of real clients' request frames (tests/corpus/frames, replayed by
# tests/tests/frame_corpus.rs): runs the real-client suite file by file against release brokers
# that write every distinct request frame they receive (skiff.frame.capture.dir), then keeps a few
# frames per (suite, client, api, version) with cargo's `collect_frames` example.
#
# Needs what scripts/test.sh needs for the real-client suite (scripts/install-clients.sh). Takes
# about as long as those suite files (10-15 minutes on 2 cores); not part of CI, which replays the
# committed corpus. Usage: scripts/capture-frames.sh [suite files...] (default: every client suite
# below).
set -euo pipefail
cd "$(dirname "$0")/.."

# Every suite that drives real clients. Left out: test_hostile.py (hand-made bad frames, not a
# client's), test_cluster.py (the same clients against an etcd cluster; needs etcd) and
# test_crash.py (the same clients across crashes; long).
suites=("$@")
if [ ${#suites[@]} -eq 0 ]; then
  suites=(test_kcat.py test_confluent.py test_kafka_python.py test_kafka_node.py test_groups.py
          test_scenarios.py test_admin_configs.py test_admin_records_groups.py test_security.py
          test_metrics.py test_placement.py test_java.py test_java_legacy.py test_java_tools.py
          test_java_admin_pending.py)
fi

cargo build --release -p skiff-broker
SKIFF_BIN="$(cd "${CARGO_TARGET_DIR:-target}" && pwd)/release/skiff"
export SKIFF_BIN

# The captured frames go to a temporary directory, or to $SKIFF_FRAME_CAPTURE_RAW (kept, to
# collect again without running the suite: collect_frames alone, as on the last line).
raw="${SKIFF_FRAME_CAPTURE_RAW:-}"
if [ -z "$raw" ]; then
  raw="$(mktemp -d -t skiff-frames-XXXXXX)"
  trap 'rm -rf "$raw"' EXIT
fi
for suite in "${suites[@]}"; do
  name="${suite%.py}"
  name="${name#test_}"
  printf '\n=== %s (frames into %s/%s)\n' "$suite" "$raw" "$name"
  # A failing test still sent its frames; the corpus replay is what must pass.
  SKIFF_TEST_FRAME_CAPTURE_DIR="$raw/$name" python3 -m pytest "tests/clients/$suite" -q \
    -p no:cacheprovider -W ignore::DeprecationWarning || echo "($suite had failures)"
done

cargo run -q -p skiff-tests --example collect_frames -- "$raw" tests/corpus/frames
