#!/usr/bin/env bash
# Broker CPU per GB (issue 41) for Skiff beside Apache Kafka 4.1.1 (produce and modern fetch) and
# Kafka 3.9.1 (the last release that down-converts: legacy fetch), with the floors each run
# measures, in one run: `skiff-bench cpu --bootstrap --pid` against each broker in turn (started
# as bench/scripts/peers.sh starts them), then bench/scripts/cpu-per-gb.py writes
# bench/reports/cpu-per-gb.md from their samples.
#
# Usage: bench/scripts/cpu-per-gb.sh
# Environment (all optional): CPU_ROUNDS=5, CPU_FETCH_GB=2, CPU_RECORDS_PER_PARTITION=16384,
#   CPU_BROKERS="skiff kafka-4.1.1 kafka-3.9.1", PEERS_WORK and PEERS_SKIP_BUILD as for peers.sh.
set -euo pipefail
PEERS_LIBRARY_ONLY=1
# shellcheck source=bench/scripts/peers.sh
source "$(dirname "${BASH_SOURCE[0]}")/peers.sh"

# The bench's records carry an old fixed timestamp: time retention would delete them under the
# reads (Kafka answered OFFSET_OUT_OF_RANGE once its first retention check came), so it is off on
# every broker.
export PEERS_KAFKA_EXTRA="log.retention.ms=-1"
ROUNDS=${CPU_ROUNDS:-5}
FETCH_GB=${CPU_FETCH_GB:-2}
RECORDS=${CPU_RECORDS_PER_PARTITION:-16384}
CPU_BROKERS=${CPU_BROKERS:-"skiff kafka-4.1.1 kafka-3.9.1"}
OUT="$ROOT/bench/reports/data/cpu-per-gb"

cd "$ROOT"
mkdir -p "$WORK" "$OUT"
if [ -z "${PEERS_SKIP_BUILD:-}" ]; then
    cargo build --release -p skiff-broker -p skiff-bench --features skiff-broker/etcd
fi
for broker in $CPU_BROKERS; do
    case $broker in kafka-*) install_kafka "${broker#kafka-}" ;; esac
done
for broker in $CPU_BROKERS; do
    if [ "$broker" = skiff ]; then
        # Spawned by skiff-bench itself, with an SSL listener: the TLS path is Skiff's alone here
        # (the peers would need keystores of their own).
        log "cpu: skiff (spawned, with TLS; load $(cut -d' ' -f1-3 /proc/loadavg))"
        uptime >"$OUT/skiff.uptime"
        "$BENCH" cpu --skiff-bin "$SKIFF" --set log.retention.ms=-1 --tls --rounds "$ROUNDS" --fetch-gb-min "$FETCH_GB" \
            --records-per-partition "$RECORDS" --out "$OUT/skiff.md"
        uptime >>"$OUT/skiff.uptime"
        continue
    fi
    state="$WORK/state/cpu-$broker"
    rm -rf "$state"
    mkdir -p "$state"
    start_broker "$broker" "$state"
    # Kafka 4 serves Fetch v4+ only (KIP-896); the others are measured at every version.
    versions=4,2,0
    case $broker in kafka-4.*) versions=4 ;; esac
    log "cpu: $broker (pid $BROKER_PID, load $(cut -d' ' -f1-3 /proc/loadavg))"
    uptime >"$OUT/$broker.uptime"
    "$BENCH" cpu --bootstrap "127.0.0.1:$BROKER_PORT" --pid "$BROKER_PID" --rounds "$ROUNDS" \
        --fetch-gb-min "$FETCH_GB" --records-per-partition "$RECORDS" --versions "$versions" \
        --out "$OUT/$broker.md"
    uptime >>"$OUT/$broker.uptime"
    stop_broker "$broker" "$state"
done
python3 "$ROOT/bench/scripts/cpu-per-gb.py" "$OUT" "$ROOT/bench/reports/cpu-per-gb.md" $CPU_BROKERS
log "wrote bench/reports/cpu-per-gb.md"
