#!/usr/bin/env bash
# Installs the real Kafka clients the test suite drives, each only if it is missing:
# kcat and openssl (Debian's packages; openssl makes the TLS tests' certificates), kafka-python,
# confluent-kafka and pytest (PyPI), kafka-node 5.0.0 (npm).
set -euo pipefail
cd "$(dirname "$0")/.."

need_apt=()
command -v kcat >/dev/null 2>&1 || need_apt+=(kcat)
command -v openssl >/dev/null 2>&1 || need_apt+=(openssl)
if [ ${#need_apt[@]} -gt 0 ]; then
  echo "installing from Debian: ${need_apt[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq "${need_apt[@]}" >/dev/null
fi

python3 - <<'PY' || python3 -m pip install -q --disable-pip-version-check kafka-python==3.0.12 confluent-kafka==2.16.1 pytest python-snappy lz4 xxhash
import importlib, sys
for name in ("kafka", "confluent_kafka", "pytest", "snappy", "lz4", "xxhash"):
    importlib.import_module(name)
import kafka
sys.exit(0 if kafka.__version__ == "3.0.12" else 1)
PY

if [ ! -d tests/clients/node/node_modules/kafka-node ]; then
  echo "installing kafka-node 5.0.0 from npm"
  (cd tests/clients/node && npm install --no-audit --no-fund --silent)
fi
