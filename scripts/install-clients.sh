#!/usr/bin/env bash
# Installs the real Kafka clients the test suite drives, each only if it is missing:
# kcat and openssl (Debian's packages; openssl makes the TLS tests' certificates), chromium and
# prometheus (Debian's packages; the operator-view test loads the status page headless and
# scrapes the cluster with a real Prometheus), kafka-python,
# confluent-kafka and pytest (PyPI), kafka-node 5.0.0 (npm), and Apache Kafka's Java client and tools
# plus old Java clients, Kafka 4.1.1's Connect worker, file connectors and Kafka Streams for the
# compaction tests, and Flink 2.0 with its exactly-once Kafka sink for the transaction tests
# (Maven, into the user's Maven cache; tests/clients/java/target gets their classpaths and is
# never committed).
set -euo pipefail
cd "$(dirname "$0")/.."

need_apt=()
command -v kcat >/dev/null 2>&1 || need_apt+=(kcat)
command -v openssl >/dev/null 2>&1 || need_apt+=(openssl)
command -v chromium >/dev/null 2>&1 || need_apt+=(chromium)
command -v prometheus >/dev/null 2>&1 || need_apt+=(prometheus)
if [ ${#need_apt[@]} -gt 0 ]; then
  echo "installing from Debian: ${need_apt[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq "${need_apt[@]}" >/dev/null
fi

python3 - <<'PY' || python3 -m pip install -q --disable-pip-version-check kafka-python==3.0.12 confluent-kafka==2.16.1 pytest pytest-xdist==3.8.0 python-snappy lz4 xxhash
import importlib, sys
for name in ("kafka", "confluent_kafka", "pytest", "xdist", "snappy", "lz4", "xxhash"):
    importlib.import_module(name)
import kafka
sys.exit(0 if kafka.__version__ == "3.0.12" else 1)
PY

if [ ! -d tests/clients/node/node_modules/kafka-node ]; then
  echo "installing kafka-node 5.0.0 from npm"
  (cd tests/clients/node && npm install --no-audit --no-fund --silent)
fi

# Maven: resolves the jars into ~/.m2 and writes each classpath only when it, or a jar it names,
# is missing (a clean clone resolves once; later runs cost nothing).
java_dir=tests/clients/java
classpath_ok() {
  [ -s "$1" ] || return 1
  local jar
  for jar in $(tr ':' ' ' < "$1"); do [ -f "$jar" ] || return 1; done
}
resolve() { # pom, classpath file, extra mvn arguments...
  local pom=$1 out=$2
  shift 2
  classpath_ok "$out" && return 0
  echo "resolving $(basename "$out" .txt) with mvn"
  mvn -q -B -Dstyle.color=never -f "$pom" dependency:build-classpath -Dmdep.outputFile="$(pwd)/$out" "$@"
}
if ! command -v mvn >/dev/null 2>&1 || ! command -v javac >/dev/null 2>&1; then
  echo "installing from Debian: maven openjdk-17-jdk-headless"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq maven openjdk-17-jdk-headless >/dev/null
fi
resolve "$java_dir/pom.xml" "$java_dir/target/classpath.txt"
resolve "$java_dir/ecosystem/pom.xml" "$java_dir/target/classpath-ecosystem.txt"
resolve "$java_dir/flink/pom.xml" "$java_dir/target/classpath-flink.txt"
grep -v '^#' "$java_dir/legacy/versions.txt" | while read -r version; do
  [ -n "$version" ] || continue
  resolve "$java_dir/legacy/pom.xml" "$java_dir/target/classpath-legacy-$version.txt" -Dkafka.version="$version"
done
