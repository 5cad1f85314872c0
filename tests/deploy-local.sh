#!/usr/bin/env bash
# `make deploy-local`: the controllers from their images, deployed with kustomize onto the
# local cluster's real node (`make up-real` first):
#
#   1. tests/images.sh --push <the node's registry>: static binaries, FROM scratch images,
#      pushed to 127.0.0.1:<KRUISE_REGISTRY_PORT>/kruise-rs/<binary>:<version>;
#   2. a kustomization under .local/deploy-local/: kustomize/overlays/<OVERLAY> (default
#      all), the component kustomize/components/real-node (nodeSelector + toleration of the
#      node's taint), images pointed at that registry, and the node agent's DaemonSet (in
#      overlays all, imagepulljob and crr) on the real node only, at its containerd socket
#      (under .local/, not /var/run); applied client-side;
#   3. waits for every Deployment's rollout (2 Ready replicas each: /readyz) and the
#      agent's, then shows the Pods and who holds each Lease.
#
#   tests/deploy-local.sh             deploy (OVERLAY=cloneset BINS=cloneset-ctl: one controller)
#   tests/deploy-local.sh delete      stop what it deployed: the Deployments, their
#                                     webhooks and the agent's DaemonSet (CRDs,
#                                     namespaces, RBAC stay)
#
# How the pieces reach each other without kube-proxy: the apiserver calls the webhooks
# through their Services resolved to the Pods' endpoints (--enable-aggregator-routing, set
# by cluster.sh with KRUISE_REAL_NODE=1) on the node's bridge; the Pods reach the
# apiserver at the `kubernetes` Service (10.0.0.1:443), DNAT'ed by node.sh to 127.0.0.1.
#
# Controllers deployed here act cluster-wide: the kwok e2e suite (which runs its own) must
# not run beside them; `make test` deploys only the CloneSet controller, for its last test,
# and deletes it again.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
state=${KRUISE_LOCAL_DIR:-$root/.local}
kubeconfig=$state/kubeconfig
version=$(sed -n '/^\[workspace.package\]/,/^\[/s/^version *= *"\(.*\)"/\1/p' Cargo.toml)
tag=${IMAGE_TAG:-$version}
overlay=${OVERLAY:-all}
if [ "$overlay" = all ]; then
  default_bins="$(grep -v '^#' tests/cluster/controllers.txt | tr '\n' ' ') daemon-agent"
else
  # kustomize/overlays/<name> deploys controllers/<name>: <name>-ctl (crr and imagepulljob
  # bring the agent).
  default_bins="$overlay-ctl"
  case $overlay in crr | imagepulljob) default_bins+=" daemon-agent" ;; esac
fi
read -r -a bins <<<"${BINS:-$default_bins}"
kubectl() { "$(tests/cluster/cluster.sh bin)/kubectl" --kubeconfig "$kubeconfig" "$@"; }
log() { echo "deploy-local: $*" >&2; }

dir=$state/deploy-local

if [ "${1:-}" = delete ]; then
  # The running parts only: the controllers' Deployments, the agent's DaemonSet and their
  # disruption budgets (and so their Pods), and their admission webhooks (left behind, a
  # webhook without endpoints would fail every CloneSet or job write: failurePolicy Fail).
  # CRDs, namespaces, RBAC (but the agent's cluster-wide reads) and Services stay: the CRDs
  # hold the cluster's objects.
  log "deleting the deployed controllers, their webhooks and the agent"
  kubectl delete deployments,daemonsets,poddisruptionbudgets --all-namespaces \
    -l app.kubernetes.io/part-of=kruise-rs --ignore-not-found --wait=true >&2
  kubectl delete mutatingwebhookconfigurations,validatingwebhookconfigurations \
    -l app.kubernetes.io/part-of=kruise-rs --ignore-not-found >&2
  kubectl wait pods --all-namespaces -l app.kubernetes.io/part-of=kruise-rs \
    --for=delete --timeout=120s >/dev/null 2>&1 || true
  # And the agent's cluster-wide reads, back to the authorizer's node-scoped ones.
  kubectl delete clusterrolebinding,clusterrole kruise-daemon-agent-cluster-reads \
    --ignore-not-found >&2
  exit 0
fi

if ! tests/cluster/node.sh status; then
  log "the real node is not up: make up-real (KRUISE_REAL_NODE=1 tests/cluster/cluster.sh up)"
  exit 1
fi
eval "$(tests/cluster/node.sh env)"
started=$SECONDS

BINS="${bins[*]}" tests/images.sh --push "$KRUISE_REGISTRY"

mkdir -p "$dir"
rel=$(realpath --relative-to="$dir" "$root/kustomize")
{
  echo "# Written by tests/deploy-local.sh: overlays/$overlay on the real node, images from its registry."
  echo "apiVersion: kustomize.config.k8s.io/v1beta1"
  echo "kind: Kustomization"
  echo "resources: [$rel/overlays/$overlay]"
  # The agent's reads: the local apiserver sends them to an authorizer on the host
  # (imagepulljob-ctl of `make up`, docs/imagepulljob.md "Node-scoped reads for the node agent"), which a
  # deployment in Pods does not serve; so RBAC grants them, as on an apiserver without it.
  if [[ " ${bins[*]} " == *" daemon-agent "* ]]; then
    echo "components: [$rel/components/real-node, $rel/components/daemon-agent-cluster-reads]"
  else
    echo "components: [$rel/components/real-node]"
  fi
  echo "images:"
  for b in "${bins[@]}"; do
    echo "- {name: kruise-rs/$b, newName: $KRUISE_REGISTRY/kruise-rs/$b, newTag: \"$tag\"}"
  done
  # The agent: on the real node only (kwok nodes have no runtime to pull into), at the
  # node's containerd socket, which lives under .local/ rather than /var/run.
  cat <<PATCH
patches:
- target: {kind: DaemonSet, name: daemon-agent}
  patch: |-
    - op: add
      path: /spec/template/spec/nodeSelector
      value: {node.kruise.io/real: "true"}
    - op: replace
      path: /spec/template/spec/volumes/0/hostPath/path
      value: $(dirname "$KRUISE_CONTAINERD_SOCKET")
    - op: add
      path: /spec/template/spec/containers/0/env/-
      value: {name: KRUISE_CRI_SOCKET, value: /hostvarrun/$(basename "$KRUISE_CONTAINERD_SOCKET")}
PATCH
} >"$dir/kustomization.yaml"

log "applying $dir"
# Client-side, as docs/kustomize.md says: server-side would reset the matchConditions the
# SidecarSet controller maintains on its Pod webhook.
# (CRDs the e2e harness installed server-side lack client-side apply's annotation: kubectl's
# own notice, not a problem.)
# The CRDs first, as controllers.sh installs them: a conversion a controller registered from
# outside the cluster (a URL: make up, the e2e tests) is reset before the apply, which could
# not merge it with the Service the shipped CRDs name (the controllers deployed here register
# that Service's caBundle when they start).
"$root/tests/cluster/controllers.sh" crds >&2
kubectl apply -k "$dir" 2> >(grep -v 'last-applied-configuration' >&2) >/dev/null
for d in $(kubectl -n kruise-system get deployments -o name); do
  kubectl -n kruise-system rollout status "$d" --timeout=180s >&2
done
for ds in $(kubectl get daemonsets -A -l app.kubernetes.io/part-of=kruise-rs -o jsonpath='{range .items[*]}{.metadata.namespace}/{.metadata.name} {end}'); do
  kubectl -n "${ds%%/*}" rollout status "daemonset/${ds#*/}" --timeout=180s >&2
done
log "deployed in $((SECONDS - started))s"
kubectl -n kruise-system get pods -o wide >&2
kubectl -n kruise-system get leases -o custom-columns=LEASE:.metadata.name,HOLDER:.spec.holderIdentity >&2
