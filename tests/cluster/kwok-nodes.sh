#!/usr/bin/env bash
# Adds kwok nodes enough for PODS more Pods (200 each; the cluster's 4 hold 440), named
# <PREFIX>-node-<i>, labelled like the cluster's own (type=kwok), and Ready at once.
# Usage: KUBECONFIG=... tests/cluster/kwok-nodes.sh PREFIX PODS   (bench-compare, chaos)
set -euo pipefail
prefix=$1
pods=$2
bin=$("$(dirname "${BASH_SOURCE[0]}")/cluster.sh" bin)
kc() { "$bin/kubectl" --request-timeout=30s "$@"; }

for i in $(seq 0 $(((pods + 199) / 200 - 1))); do
  cat <<YAML
---
apiVersion: v1
kind: Node
metadata:
  name: $prefix-node-$i
  annotations: {kwok.x-k8s.io/node: fake, node.alpha.kubernetes.io/ttl: "0"}
  labels: {type: kwok, kubernetes.io/hostname: $prefix-node-$i, kubernetes.io/os: linux, kubernetes.io/arch: amd64}
status:
  allocatable: {cpu: "64", memory: 512Gi, pods: "250"}
  capacity: {cpu: "64", memory: 512Gi, pods: "250"}
YAML
done | kc apply -f - >/dev/null
sleep 2
# The node lifecycle controller removes it too; do not wait for it.
kc taint nodes -l type=kwok node.kubernetes.io/not-ready:NoSchedule- >/dev/null 2>&1 || true
