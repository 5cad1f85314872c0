#!/usr/bin/env bash
# `make conformance-1.32`: OpenKruise v1.9.0's e2e suites on Kubernetes 1.32 with in-place
# Pod resize on (the alpha feature gate InPlacePodVerticalScaling for the apiserver,
# controller-manager, scheduler and the real node's kubelet), on a cluster of its own with
# the real node real-0, for the specs of k8s-1.32.txt, which need 1.32's resize behaviour.
#
#   tests/conformance/on-1.32.sh [SUITE...]     default: inplacevpa
#
# State in .local/k8s-1.32 (KRUISE_LOCAL_DIR), results in target/conformance-1.32/
# (CONFORMANCE_OUT); the cluster is taken down after (KEEP_CLUSTER=1 keeps it). The real
# node uses the host's ports, bridge and registry port, so the default cluster must be down
# (`make down`): one real node per machine. Root, as `make up-real`.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
log() { echo "conformance-1.32: $*" >&2; }

if (unset KRUISE_LOCAL_DIR KRUISE_K8S_VERSION; "$root/tests/cluster/cluster.sh" status) >/dev/null 2>&1; then
  log "the default cluster (.local) is up: take it down first (make down); one real node per machine"
  exit 1
fi

export KRUISE_K8S_VERSION=1.32
export KRUISE_K8S_FEATURE_GATES=InPlacePodVerticalScaling=true
export KRUISE_REAL_NODE=1
export KRUISE_LOCAL_DIR=${KRUISE_LOCAL_DIR:-$root/.local/k8s-1.32}
export CONFORMANCE_OUT=${CONFORMANCE_OUT:-$root/target/conformance-1.32}

down() {
  if [ "${KEEP_CLUSTER:-0}" = 1 ]; then
    log "the 1.32 cluster stays up (KRUISE_LOCAL_DIR=$KRUISE_LOCAL_DIR KRUISE_K8S_VERSION=1.32 tests/cluster/cluster.sh down)"
  else
    "$root/tests/cluster/cluster.sh" down || true
  fi
}
trap down EXIT
"$root/tests/conformance/run.sh" "${@:-inplacevpa}"
