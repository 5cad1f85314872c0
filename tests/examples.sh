#!/usr/bin/env bash
# Applies the manifests of examples/ to the local cluster (namespace "default").
#   examples.sh apply | check (server-side dry run)
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/.." && pwd)
kubectl="$("$here/cluster/cluster.sh" bin)/kubectl --kubeconfig $root/.local/kubeconfig"
case "${1:-apply}" in
  apply)
    $kubectl apply -n default -f "$root/examples/" ;;
  check)
    $kubectl apply -n default --dry-run=server -f "$root/examples/" ;;
  *)
    echo "usage: $0 apply|check" >&2; exit 2 ;;
esac
