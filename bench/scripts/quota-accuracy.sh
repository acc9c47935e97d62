#!/usr/bin/env bash
# Client-quota accuracy beside Apache Kafka 4.1.1 (issue 39): the same producer_byte_rate of
# 1 MiB/s set with Kafka 4.1.1's kafka-configs (kafka.admin.ConfigCommand) for client id `quota-producer`, the same
# librdkafka producer (tests/clients/test_admin_quotas.py run as a script: 1000-byte records as
# fast as the broker lets it, for 25 s), the acknowledged bytes per second over seconds 5-25;
# QUOTA_RUNS runs each, alternating brokers. Kafka is installed with Maven as bench/scripts/peers.sh
# installs it (bench/scripts/peers/pom.xml), started as a one-node KRaft broker.
#
# Usage: bench/scripts/quota-accuracy.sh     (prints one line per run: broker, B/s, fraction)
# Environment: QUOTA_RUNS=3, QUOTA_WORK=/tmp/skiff-quota-accuracy, SKIFF_BIN=target/release/skiff
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
RUNS=${QUOTA_RUNS:-3}
WORK=${QUOTA_WORK:-/tmp/skiff-quota-accuracy}
SKIFF=${SKIFF_BIN:-$ROOT/target/release/skiff}
VERSION=4.1.1
LIBS="$WORK/kafka-$VERSION/libs"
QUOTA=1048576
PID=
trap '[ -n "$PID" ] && kill "$PID" 2>/dev/null || true' EXIT

free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
wait_port() { until python3 -c "import socket; socket.create_connection(('127.0.0.1', $1), 1)" 2>/dev/null; do sleep 0.5; done; }

mkdir -p "$WORK"
if [ ! -f "$LIBS/kafka_2.13-$VERSION.jar" ]; then
    mkdir -p "$LIBS"
    mvn -q -B -f "$ROOT/bench/scripts/peers/pom.xml" "-Dkafka.version=$VERSION" -Dkafka.log4j2 \
        dependency:copy-dependencies "-DoutputDirectory=$LIBS" >"$WORK/mvn.log" 2>&1
fi

start_kafka() { # dir port
    local dir=$1 port=$2 controller
    controller=$(free_port)
    cat >"$dir/server.properties" <<PROPS
process.roles=broker,controller
node.id=1
controller.quorum.voters=1@127.0.0.1:$controller
listeners=PLAINTEXT://127.0.0.1:$port,CONTROLLER://127.0.0.1:$controller
advertised.listeners=PLAINTEXT://127.0.0.1:$port
controller.listener.names=CONTROLLER
inter.broker.listener.name=PLAINTEXT
listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT
log.dirs=$dir/data
offsets.topic.replication.factor=1
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
PROPS
    java -cp "$LIBS/*" kafka.tools.StorageTool format -t "$(python3 -c 'import base64,uuid; print("A" + base64.urlsafe_b64encode(uuid.uuid4().bytes).decode()[1:22])')" \
        -c "$dir/server.properties" >"$dir/format.log" 2>&1
    java -Xmx1g -Xms1g -cp "$LIBS/*" kafka.Kafka "$dir/server.properties" >"$dir/broker.log" 2>&1 &
    PID=$!
}

start_skiff() { # dir port
    "$SKIFF" serve --set "log.dirs=$1/data" --set "listeners=PLAINTEXT://127.0.0.1:$2" >"$1/broker.log" 2>&1 &
    PID=$!
}

measure() { # broker run
    local dir="$WORK/$1-$2" port
    rm -rf "$dir"; mkdir -p "$dir"
    port=$(free_port)
    "start_$1" "$dir" "$port"
    wait_port "$port"
    sleep 3
    java -cp "$LIBS/*" org.apache.kafka.tools.TopicCommand --bootstrap-server "127.0.0.1:$port" \
        --create --topic quota-topic --partitions 1 --replication-factor 1 >/dev/null
    java -cp "$LIBS/*" kafka.admin.ConfigCommand --bootstrap-server "127.0.0.1:$port" \
        --alter --entity-type clients --entity-name quota-producer --add-config "producer_byte_rate=$QUOTA" >/dev/null
    sleep 1
    echo "$1 $(python3 "$ROOT/tests/clients/test_admin_quotas.py" --bootstrap "127.0.0.1:$port")"
    kill "$PID"; wait "$PID" 2>/dev/null || true; PID=
}

for run in $(seq 1 "$RUNS"); do
    if [ $((run % 2)) = 1 ]; then order="skiff kafka"; else order="kafka skiff"; fi
    for broker in $order; do measure "$broker" "$run"; done
done
