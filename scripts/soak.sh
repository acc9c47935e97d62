#!/usr/bin/env bash
# The replication soak, outside CI: the leader-kill test of tests/clients/test_replication.py with
# many kill cycles (default 50) on 3 brokers and a 3-member etcd on loopback. Prints the seed;
# SKIFF_SEED=<seed> replays one run's kill timing.
# Every broker's log is printed at the end (SKIFF_TEST_DUMP_LOGS), for a failed cycle.
#   scripts/soak.sh [KILLS]
set -euo pipefail
cd "$(dirname "$0")/.."
kills="${1:-50}"
cargo build --release -p skiff-broker --features etcd
SKIFF_BIN="$PWD/target/release/skiff" SKIFF_REPLICATION_KILLS="$kills" SKIFF_TEST_DUMP_LOGS=1 \
  python3 -m pytest tests/clients/test_replication.py -k leader_kills -q -s -p no:cacheprovider
