#!/usr/bin/env bash
# Installs what the cluster-mode build and tests need, each only if it is missing (Debian
# packages): protoc (protobuf-compiler), which etcd-client's build script needs to compile etcd's
# protos when skiff-meta's `etcd` feature is on, and etcd itself (etcd-server, etcd-client for
# etcdctl), which the etcd tests start on loopback. The default build needs none of them.
set -euo pipefail

need_apt=()
command -v protoc >/dev/null 2>&1 || need_apt+=(protobuf-compiler)
command -v etcd >/dev/null 2>&1 || need_apt+=(etcd-server)
command -v etcdctl >/dev/null 2>&1 || need_apt+=(etcd-client)
if [ ${#need_apt[@]} -gt 0 ]; then
  echo "installing from Debian: ${need_apt[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq "${need_apt[@]}" >/dev/null
fi
