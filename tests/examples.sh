#!/usr/bin/env bash
# Applies the manifests of examples/ to the local cluster (namespace "default").
#   examples.sh apply | check (server-side dry run)
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/.." && pwd)
kubectl="$("$here/cluster/cluster.sh" bin)/kubectl --kubeconfig $root/.local/kubeconfig"
case "${1:-apply}" in
  apply|check)
    dry=(); [[ $1 == check ]] && dry=(--dry-run=server)
    # The ContainerRecreateRequest needs its Pod running with container IDs, which only a
    # real node's kubelet reports: crr-ctl's admission refuses it on the kwok nodes (and
    # in a dry run, where the Pod is not created). Applied last, its refusal is reported,
    # not fatal.
    files=()
    for f in "$root"/examples/*.yaml; do
      [[ $(basename "$f") == containerrecreaterequest.yaml ]] || files+=(-f "$f")
    done
    $kubectl apply -n default "${dry[@]}" "${files[@]}"
    $kubectl apply -n default "${dry[@]}" -f "$root/examples/containerrecreaterequest.yaml" ||
      echo "examples.sh: ContainerRecreateRequest xxx not admitted (see docs/containerrecreaterequest.md)" >&2 ;;
  *)
    echo "usage: $0 apply|check" >&2; exit 2 ;;
esac
