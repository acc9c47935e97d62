#!/usr/bin/env bash
# The broker's own service time per API (issue 41) for Skiff beside Apache Kafka 4.1.1, in one run:
# each broker is started as bench/scripts/peers.sh starts it (Skiff with its metrics listener,
# Kafka with JMX on a free port), then `skiff-bench latency` runs against it twice with acks=1:
#   - at 10, 50 and 90 % of that broker's own maximum (measured unthrottled first), and
#   - at the same absolute rates for every broker (SERVICE_TIME_FIXED_RATES, msg/s),
# reading over each rate's measured part Skiff's `skiff_request_service_time_us` histogram, or
# Kafka's RequestMetrics histograms over JMX (bench/scripts/jmx/KafkaRequestTimes.java).
# Records and markdown go to bench/reports/data/service-time/; bench/reports/service-time.md is
# written by hand from them.
#
# Usage: bench/scripts/service-time.sh
# Environment (all optional): SERVICE_TIME_RUNS=2 (even runs in reverse order),
#   SERVICE_TIME_BROKERS="skiff kafka-4.1.1", SERVICE_TIME_SECONDS=10 (per rate),
#   SERVICE_TIME_FIXED_RATES=5000,25000, SERVICE_TIME_OUT (the records' directory), PEERS_WORK and
#   PEERS_SKIP_BUILD as for peers.sh.
set -euo pipefail
PEERS_LIBRARY_ONLY=1
# shellcheck source=bench/scripts/peers.sh
source "$(dirname "${BASH_SOURCE[0]}")/peers.sh"

# The binaries of this checkout's build (CARGO_TARGET_DIR when set, as cargo builds them).
SKIFF="${CARGO_TARGET_DIR:-$ROOT/target}/release/skiff"
BENCH="${CARGO_TARGET_DIR:-$ROOT/target}/release/skiff-bench"
RUNS=${SERVICE_TIME_RUNS:-2}
SERVICE_BROKERS=${SERVICE_TIME_BROKERS:-"skiff kafka-4.1.1"}
PER_RATE=${SERVICE_TIME_SECONDS:-10}
FIXED=${SERVICE_TIME_FIXED_RATES:-5000,25000}
OUT=${SERVICE_TIME_OUT:-$ROOT/bench/reports/data/service-time}

cd "$ROOT"
mkdir -p "$WORK" "$OUT"
if [ -z "${PEERS_SKIP_BUILD:-}" ]; then
    nice cargo build --release -q -p skiff-broker -p skiff-bench
fi
for broker in $SERVICE_BROKERS; do
    case $broker in kafka-*) install_kafka "${broker#kafka-}" ;; esac
done

measure() { # broker run
    local broker=$1 run=$2 state probe=() port
    state="$WORK/state/service-time-$broker"
    rm -rf "$state"
    mkdir -p "$state"
    port=$(free_port)
    case $broker in
        skiff)
            export PEERS_SKIFF_EXTRA="skiff.metrics.listener=127.0.0.1:$port"
            probe=(--service-time-metrics "127.0.0.1:$port")
            ;;
        kafka-*)
            export PEERS_KAFKA_JVM_EXTRA="-Dcom.sun.management.jmxremote -Dcom.sun.management.jmxremote.port=$port -Dcom.sun.management.jmxremote.rmi.port=$port -Dcom.sun.management.jmxremote.host=127.0.0.1 -Djava.rmi.server.hostname=127.0.0.1 -Dcom.sun.management.jmxremote.authenticate=false -Dcom.sun.management.jmxremote.ssl=false"
            probe=(--service-time-jmx "127.0.0.1:$port")
            ;;
    esac
    log "run $run: $broker (load $(cut -d' ' -f1-3 /proc/loadavg))"
    start_broker "$broker" "$state"
    uptime >"$OUT/$broker-run$run.uptime"
    "$BENCH" latency --bootstrap "127.0.0.1:$BROKER_PORT" --name "$broker-run$run" --acks 1 \
        --seconds "$PER_RATE" "${probe[@]}" --out "$OUT"
    "$BENCH" latency --bootstrap "127.0.0.1:$BROKER_PORT" --name "$broker-run$run-fixed" --acks 1 \
        --seconds "$PER_RATE" --rates-per-second "$FIXED" "${probe[@]}" --out "$OUT"
    uptime >>"$OUT/$broker-run$run.uptime"
    stop_broker "$broker" "$state"
    rm -rf "$state"
}

for run in $(seq 1 "$RUNS"); do
    order=($SERVICE_BROKERS)
    if [ $((run % 2)) = 0 ]; then
        reversed=()
        for ((i = ${#order[@]} - 1; i >= 0; i--)); do reversed+=("${order[i]}"); done
        order=("${reversed[@]}")
    fi
    for broker in "${order[@]}"; do measure "$broker" "$run"; done
done
log "wrote $OUT"
