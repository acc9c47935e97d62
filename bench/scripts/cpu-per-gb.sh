#!/usr/bin/env bash
# Broker CPU per GB (issue 41) for Skiff beside Apache Kafka 4.1.1 (produce and modern fetch) and
# Kafka 3.9.1 (the last release that down-converts: legacy fetch), with the floors each run
# measures, in one run, then bench/scripts/cpu-per-gb.py writes bench/reports/<report>.md.
#
# 1. Single brokers (started as bench/scripts/peers.sh starts them, each with an SSL listener on a
#    PEM keystore made here with openssl: an EC P-256 certificate for 127.0.0.1): all run at once,
#    and each round runs `skiff-bench cpu --rounds 1` against each broker in turn (the order
#    reversed every other round), so every broker's rounds interleave with the others'; a first
#    warm-up round of each is not reported.
# 2. Clusters of CPU_CLUSTER_SIZE brokers: Skiff on a one-member etcd, Kafka 4.1.1 KRaft with one
#    separate controller process (not counted: only the brokers' CPU is read, as etcd's is not for
#    Skiff). Each round runs `skiff-bench cpu --cluster --rounds 1` against each cluster in turn:
#    produce at RF 1 (acks=1) and RF 2..n (acks=all, min.insync.replicas=2), the first broker
#    leading every partition.
#
# Usage: bench/scripts/cpu-per-gb.sh
# Environment (all optional): CPU_ROUNDS=5, CPU_FETCH_GB=2, CPU_RECORDS_PER_PARTITION=16384,
#   CPU_BROKERS="skiff kafka-4.1.1 kafka-3.9.1", CPU_CLUSTER_BROKERS="skiff kafka-4.1.1" (either
#   may be empty), CPU_CLUSTER_SIZE=3, CPU_REPORT=cpu-per-gb, PEERS_WORK and PEERS_SKIP_BUILD as
#   for peers.sh.
set -euo pipefail
PEERS_LIBRARY_ONLY=1
# shellcheck source=bench/scripts/peers.sh
source "$(dirname "${BASH_SOURCE[0]}")/peers.sh"

# The bench's records carry an old fixed timestamp: time retention would delete them under the
# reads (Kafka answered OFFSET_OUT_OF_RANGE once its first retention check came), so it is off on
# every broker.
export PEERS_KAFKA_EXTRA="log.retention.ms=-1"
export PEERS_SKIFF_EXTRA="log.retention.ms=-1"
ROUNDS=${CPU_ROUNDS:-5}
FETCH_GB=${CPU_FETCH_GB:-2}
RECORDS=${CPU_RECORDS_PER_PARTITION:-16384}
CPU_BROKERS=${CPU_BROKERS-"skiff kafka-4.1.1 kafka-3.9.1"}
CPU_CLUSTER_BROKERS=${CPU_CLUSTER_BROKERS-"skiff kafka-4.1.1"}
CLUSTER_SIZE=${CPU_CLUSTER_SIZE:-3}
REPORT=${CPU_REPORT:-cpu-per-gb}
OUT="$ROOT/bench/reports/data/$REPORT"
STATE="$WORK/state/cpu"

cd "$ROOT"
if [ -z "${PEERS_SKIP_BUILD:-}" ]; then
    cargo build --release -p skiff-broker -p skiff-bench --features skiff-broker/etcd
fi
for broker in $CPU_BROKERS $CPU_CLUSTER_BROKERS; do
    case $broker in kafka-*) install_kafka "${broker#kafka-}" ;; esac
done
rm -rf "$OUT" "$STATE"
mkdir -p "$OUT" "$STATE"
{
    echo "command: bench/scripts/cpu-per-gb.sh"
    echo "env: CPU_ROUNDS=$ROUNDS CPU_FETCH_GB=$FETCH_GB CPU_RECORDS_PER_PARTITION=$RECORDS CPU_CLUSTER_SIZE=$CLUSTER_SIZE"
    echo "brokers: $CPU_BROKERS; clusters: $CPU_CLUSTER_BROKERS"
    echo "commit: $(git -C "$ROOT" rev-parse --short HEAD)"
    echo "started: $(date -u +%FT%TZ)"
} >"$OUT/run.txt"

# The run's TLS keystore: an EC P-256 end-entity certificate for 127.0.0.1 (the kind rcgen makes for the bench's
# spawned Skiff), then its unencrypted PKCS#8 key, as Skiff's and Kafka's PEM keystores read them.
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 2 \
    -subj /CN=localhost -addext "subjectAltName=IP:127.0.0.1,DNS:localhost" \
    -addext "basicConstraints=critical,CA:FALSE" \
    -keyout "$STATE/key.pem" -out "$STATE/certificate.pem" 2>/dev/null
openssl pkcs8 -topk8 -nocrypt -in "$STATE/key.pem" -out "$STATE/key-pkcs8.pem"
cat "$STATE/certificate.pem" "$STATE/key-pkcs8.pem" >"$STATE/keystore.pem"
KEYSTORE="$STATE/keystore.pem"

# The list in order on odd rounds and reversed on even ones.
round_order() { # round names...
    local round=$1 i
    shift
    local names=("$@")
    if [ $((round % 2)) = 1 ]; then echo "${names[@]}"; return; fi
    for ((i = ${#names[@]} - 1; i >= 0; i--)); do printf '%s ' "${names[i]}"; done
    echo
}

# One bench invocation with the load average before and after it (<name>.uptime). Round 0 is the
# warm-up (a fresh JVM compiles its hot paths during its first gigabytes): kept apart, not reported.
measured() { # name round bench-arguments...
    local name=$1 round=$2 out=$OUT
    shift 2
    if [ "$round" = 0 ]; then out="$OUT/warm-up"; fi
    mkdir -p "$out"
    log "cpu: $name round $round (load $(cut -d' ' -f1-3 /proc/loadavg))"
    uptime >>"$out/$name.uptime"
    "$BENCH" cpu --rounds 1 --fetch-gb-min "$FETCH_GB" --records-per-partition "$RECORDS" \
        --out "$out/$name.r$round.md" "$@" 2>"$out/$name.r$round.log"
    uptime >>"$out/$name.uptime"
}

# --- single brokers ---------------------------------------------------------------------------
declare -A PORT SSL_PORT PID
export PEERS_SSL_KEYSTORE="$KEYSTORE"
for broker in $CPU_BROKERS; do
    mkdir -p "$STATE/$broker"
    start_broker "$broker" "$STATE/$broker"
    PORT[$broker]=$BROKER_PORT SSL_PORT[$broker]=$BROKER_SSL_PORT PID[$broker]=$BROKER_PID
done
unset PEERS_SSL_KEYSTORE
for round in $(seq 0 "$ROUNDS"); do
    for broker in $(round_order "$round" $CPU_BROKERS); do
        # Kafka 4 serves Fetch v4+ only (KIP-896); the others are measured at every version.
        versions=4,2,0
        case $broker in kafka-4.*) versions=4 ;; esac
        measured "$broker" "$round" --bootstrap "127.0.0.1:${PORT[$broker]}" --pid "${PID[$broker]}" \
            --ssl-bootstrap "127.0.0.1:${SSL_PORT[$broker]}" --ssl-keystore "$KEYSTORE" --versions "$versions"
    done
done
for broker in $CPU_BROKERS; do
    BROKER_PID=${PID[$broker]}
    stop_broker "$broker" "$STATE/$broker"
done

# --- clusters ---------------------------------------------------------------------------------
declare -A CLUSTER_BOOTSTRAP CLUSTER_PIDS SIDE_PIDS

start_skiff_cluster() { # dir
    local dir=$1 client peer node addresses=() pids=()
    mkdir -p "$dir"
    client=$(free_port)
    peer=$(free_port)
    etcd --name e1 --data-dir "$dir/etcd" \
        --listen-client-urls "http://127.0.0.1:$client" --advertise-client-urls "http://127.0.0.1:$client" \
        --listen-peer-urls "http://127.0.0.1:$peer" --initial-advertise-peer-urls "http://127.0.0.1:$peer" \
        --initial-cluster "e1=http://127.0.0.1:$peer" >"$dir/etcd.log" 2>&1 &
    SIDE_PIDS[skiff]=$!
    STARTED_PIDS+=("$!")
    wait_for_port "$client" "$!" 30
    for node in $(seq 1 "$CLUSTER_SIZE"); do
        mkdir -p "$dir/b$node"
        # No controlled shutdown: when a failed run's exit trap stops etcd with the brokers, a
        # broker waiting to hand its leaderships over through etcd did not exit for minutes.
        start_skiff "$dir/b$node" --set "node.id=$node" --set "skiff.metadata.store=etcd://127.0.0.1:$client" \
            --set skiff.cluster.name=cpu --set controlled.shutdown.enable=false
        STARTED_PIDS+=("$BROKER_PID")
        wait_for_port "$BROKER_PORT" "$BROKER_PID" 60
        addresses+=("127.0.0.1:$BROKER_PORT")
        pids+=("$BROKER_PID")
    done
    CLUSTER_BOOTSTRAP[skiff]=$(IFS=,; echo "${addresses[*]}")
    CLUSTER_PIDS[skiff]=$(IFS=,; echo "${pids[*]}")
}

# The settings every node of a Kafka cluster here shares (the controller is node 100).
kafka_cluster_properties() { # node-id roles controller-port dir
    printf '%s\n' "process.roles=$2" "node.id=$1" "controller.quorum.voters=100@127.0.0.1:$3" \
        controller.listener.names=CONTROLLER "log.dirs=$4/data" "$PEERS_KAFKA_EXTRA"
    kafka_small_cluster_properties
}

start_kafka_cluster() { # name dir
    local name=$1 dir=$2 version=${1#kafka-} id controller node port addresses=() pids=()
    id=$(kafka_cluster_id)
    controller=$(free_port)
    mkdir -p "$dir/controller"
    {
        kafka_cluster_properties 100 controller "$controller" "$dir/controller"
        echo "listeners=CONTROLLER://127.0.0.1:$controller"
        echo "listener.security.protocol.map=CONTROLLER:PLAINTEXT"
    } >"$dir/controller/server.properties"
    start_kafka_node "$version" "$dir/controller" "$id"
    SIDE_PIDS[$name]=$BROKER_PID
    STARTED_PIDS+=("$BROKER_PID")
    wait_for_port "$controller" "$BROKER_PID" 120
    for node in $(seq 1 "$CLUSTER_SIZE"); do
        port=$(free_port)
        mkdir -p "$dir/b$node"
        {
            kafka_cluster_properties "$node" broker "$controller" "$dir/b$node"
            echo "listeners=PLAINTEXT://127.0.0.1:$port"
            echo "advertised.listeners=PLAINTEXT://127.0.0.1:$port"
            echo "inter.broker.listener.name=PLAINTEXT"
            echo "listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT"
        } >"$dir/b$node/server.properties"
        start_kafka_node "$version" "$dir/b$node" "$id"
        STARTED_PIDS+=("$BROKER_PID")
        addresses+=("127.0.0.1:$port")
        pids+=("$BROKER_PID")
    done
    for node in $(seq 1 "$CLUSTER_SIZE"); do
        wait_for_port "${addresses[node - 1]#127.0.0.1:}" "${pids[node - 1]}" 120
    done
    CLUSTER_BOOTSTRAP[$name]=$(IFS=,; echo "${addresses[*]}")
    CLUSTER_PIDS[$name]=$(IFS=,; echo "${pids[*]}")
}

for broker in $CPU_CLUSTER_BROKERS; do
    case $broker in
        skiff) start_skiff_cluster "$STATE/cluster-$broker" ;;
        kafka-*) start_kafka_cluster "$broker" "$STATE/cluster-$broker" ;;
    esac
done
for round in $(seq 0 "$ROUNDS"); do
    for broker in $(round_order "$round" $CPU_CLUSTER_BROKERS); do
        measured "$broker-cluster" "$round" --cluster --bootstrap "${CLUSTER_BOOTSTRAP[$broker]}" \
            --pid "${CLUSTER_PIDS[$broker]}"
    done
done
for broker in $CPU_CLUSTER_BROKERS; do
    # The brokers first, then etcd or the controller.
    for pid in ${CLUSTER_PIDS[$broker]//,/ } ${SIDE_PIDS[$broker]}; do
        BROKER_PID=$pid
        stop_broker "$broker" "$STATE/cluster-$broker"
    done
done
rm -rf "$STATE"
echo "finished: $(date -u +%FT%TZ)" >>"$OUT/run.txt"

# shellcheck disable=SC2086
python3 "$ROOT/bench/scripts/cpu-per-gb.py" "$OUT" "$ROOT/bench/reports/$REPORT.md" $CPU_BROKERS \
    $(for broker in $CPU_CLUSTER_BROKERS; do echo "$broker-cluster"; done)
log "wrote bench/reports/$REPORT.md"
