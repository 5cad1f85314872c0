#!/usr/bin/env bash
# `make deploy-local`: every controller from its image, deployed with kustomize onto the
# local cluster's real node (`make up-real` first):
#
#   1. tests/images.sh --push <the node's registry>: static binaries, FROM scratch images,
#      pushed to 127.0.0.1:<KRUISE_REGISTRY_PORT>/kruise-rs/<binary>:<version>;
#   2. a kustomization under .local/deploy-local/: kustomize/overlays/all, the component
#      kustomize/components/real-node (nodeSelector + toleration of the node's taint) and
#      images pointed at that registry; applied server-side;
#   3. waits for every Deployment's rollout (2 Ready replicas each: /readyz), then shows
#      the Pods and who holds each Lease.
#
# How the pieces reach each other without kube-proxy: the apiserver calls the webhooks
# through their Services resolved to the Pods' endpoints (--enable-aggregator-routing, set
# by cluster.sh with KRUISE_REAL_NODE=1) on the node's bridge; the Pods reach the
# apiserver at the `kubernetes` Service (10.0.0.1:443), DNAT'ed by node.sh to 127.0.0.1.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
state=${KRUISE_LOCAL_DIR:-$root/.local}
kubeconfig=$state/kubeconfig
version=$(sed -n '/^\[workspace.package\]/,/^\[/s/^version *= *"\(.*\)"/\1/p' Cargo.toml)
tag=${IMAGE_TAG:-$version}
read -r -a bins <<<"${BINS:-$(grep -v '^#' tests/cluster/controllers.txt | tr '\n' ' ')}"
kubectl() { "$(tests/cluster/cluster.sh bin)/kubectl" --kubeconfig "$kubeconfig" "$@"; }
log() { echo "deploy-local: $*" >&2; }

if ! tests/cluster/node.sh status; then
  log "the real node is not up: make up-real (KRUISE_REAL_NODE=1 tests/cluster/cluster.sh up)"
  exit 1
fi
eval "$(tests/cluster/node.sh env)"
started=$SECONDS

tests/images.sh --push "$KRUISE_REGISTRY"

dir=$state/deploy-local
mkdir -p "$dir"
rel=$(realpath --relative-to="$dir" "$root/kustomize")
{
  echo "# Written by tests/deploy-local.sh: overlays/all on the real node, images from its registry."
  echo "apiVersion: kustomize.config.k8s.io/v1beta1"
  echo "kind: Kustomization"
  echo "resources: [$rel/overlays/all]"
  echo "components: [$rel/components/real-node]"
  echo "images:"
  for b in "${bins[@]}"; do
    echo "- {name: kruise-rs/$b, newName: $KRUISE_REGISTRY/kruise-rs/$b, newTag: \"$tag\"}"
  done
} >"$dir/kustomization.yaml"

log "applying $dir"
# Client-side, as the README says: server-side would reset the matchConditions the
# SidecarSet controller maintains on its Pod webhook.
# (CRDs the e2e harness installed server-side lack client-side apply's annotation: kubectl's
# own notice, not a problem.)
kubectl apply -k "$dir" 2> >(grep -v 'last-applied-configuration' >&2) >/dev/null
for d in $(kubectl -n kruise-system get deployments -o name); do
  kubectl -n kruise-system rollout status "$d" --timeout=180s >&2
done
log "deployed in $((SECONDS - started))s"
kubectl -n kruise-system get pods -o wide >&2
kubectl -n kruise-system get leases -o custom-columns=LEASE:.metadata.name,HOLDER:.spec.holderIdentity >&2
