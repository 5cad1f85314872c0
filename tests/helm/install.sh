#!/usr/bin/env bash
# `make helm-test`: the chart installed for real on the local cluster's real node
# (`make up-real` first; not part of make test), images from the node's registry:
#
#   1. tests/images.sh --push <the node's registry>: every controller, the node agent and
#      kruise-helm-hook (the uninstall guard), as deploy-local does;
#   2. helm upgrade --install (release kruise in default, --take-ownership of the CRDs and
#      namespaces an earlier `make up` or deploy-local made) with every controller on the
#      real node → every controller Ready, the node agent Ready, and a CloneSet of
#      examples/cloneset-cs-demo.yaml defaulted and validated by the chart's webhooks and
#      reaching its replicas (tests/helm/tests/install.rs: installed);
#   3. helm upgrade disabling the BroadcastJob controller and turning on the gate
#      ResourcesDeletionProtection → its Deployment, RBAC, Services and webhooks gone, its
#      CRD kept, the other controllers' RBAC, Services and webhooks untouched, not one of
#      the CloneSet's Pods rewritten, deletion protection now on (install.rs: upgraded);
#   4. helm uninstall refused by the guard while the CloneSet exists (its message checked),
#      nothing deleted (install.rs: guard_held); the CloneSet deleted, helm uninstall
#      goes through, the CRDs stay (install.rs: uninstalled).
#
#   tests/helm/install.sh             all of the above (NO_BUILD=1: push the images built before)
#   tests/helm/install.sh dry-run     helm install --dry-run=server against $KUBECONFIG's
#                                     cluster (no real node needed), then every rendered
#                                     object through a server-side dry-run apply: the
#                                     apiserver's validation, admission and CRD schemas,
#                                     nothing created
#   tests/helm/install.sh delete      helm uninstall --no-hooks (CRDs stay)
#
# HELM_TEST_SCOPE=minimal (what `make test` runs, after its deploy-local step, with the
# images that step built): the same four phases with only cloneset, imagepulljob and the
# node agent enabled (every other controller `enabled: false`), the upgrade disabling
# imagepulljob; the static binaries of cloneset-ctl, imagepulljob-ctl, daemon-agent and
# kruise-helm-hook built before (tests/images.sh --local) are reused (cargo finds them fresh).
#
# Controllers installed here act cluster-wide: the kwok e2e suite (which runs its own) and
# `make up`'s controllers must not run beside them (make down, then make up-real).
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$root"
state=${KRUISE_LOCAL_DIR:-$root/.local}
export KUBECONFIG=${KUBECONFIG:-$state/kubeconfig}
release=${HELM_RELEASE:-kruise}
release_ns=${HELM_RELEASE_NAMESPACE:-default}
chart=$root/deploy/helm/kruise-rs
version=$(sed -n '/^\[workspace.package\]/,/^\[/s/^version *= *"\(.*\)"/\1/p' Cargo.toml)
tag=${IMAGE_TAG:-$version}
dir=$state/helm-test
mkdir -p "$dir"
log() { echo "helm-test: $*" >&2; }
helm_bin=$(tests/helm/build.sh)
# The symlink to deploy/crds is by design (files/crds): Helm's notice about it is noise.
helm() { "$helm_bin" "$@" 2> >(grep -v 'found symbolic link in path' >&2); }
# Namespaces stuck Terminating, with the conditions the namespace controller gives for them
# (what it cannot delete, and why): the objects the uninstall guard counts there.
stuck_namespaces() {
  "$(tests/cluster/cluster.sh bin)/kubectl" get namespaces -o json | jq -r '.items[]
    | select(.status.phase == "Terminating")
    | "terminating: \(.metadata.name): " + ([.status.conditions[]? | select(.status == "True")
        | "\(.type): \(.message)"] | join("; "))' >&2 || true
}
phase() { # the typed assertions of one phase (tests/helm/tests/install.rs)
  KRUISE_HELM_INSTALL=1 HELM_TEST_DIR=$dir cargo test -p kruise-helm-tests --quiet --test install -- \
    --ignored --exact --test-threads=1 "$1"
}

case "${1:-}" in
  dry-run)
    log "helm install --dry-run=server against $KUBECONFIG"
    helm upgrade --install "$release" "$chart" -n "$release_ns" --dry-run=server --take-ownership >"$dir/dry-run.txt"
    # The manifests (hooks included) without Helm's release summary around them.
    sed -n '/^HOOKS:$/,$p' "$dir/dry-run.txt" | sed '1d; /^MANIFEST:$/d; /^NOTES:$/,$d' >"$dir/dry-run.yaml"
    log "rendered $(grep -c '^kind:' "$dir/dry-run.yaml") objects into $dir/dry-run.yaml"
    # Each object through the apiserver's validation, admission and CRD schemas, nothing
    # persisted (server-side dry run; conflicts with what `make up` applied are forced, in
    # the dry run only).
    "$(tests/cluster/cluster.sh bin)/kubectl" apply --server-side --dry-run=server --force-conflicts \
      --field-manager=helm-test-dry-run -f "$dir/dry-run.yaml" >"$dir/dry-run-apply.txt"
    log "server-side dry run: $(wc -l <"$dir/dry-run-apply.txt") objects accepted"
    exit 0
    ;;
  delete)
    helm uninstall "$release" -n "$release_ns" --no-hooks --wait --ignore-not-found
    exit 0
    ;;
  "") ;;
  *)
    echo "usage: $0 [dry-run | delete]" >&2
    exit 2
    ;;
esac

if ! tests/cluster/node.sh status; then
  log "the real node is not up: make up-real (KRUISE_REAL_NODE=1 tests/cluster/cluster.sh up)"
  exit 1
fi
eval "$(tests/cluster/node.sh env)"
started=$SECONDS

all_controllers=$(grep -v '^#' tests/cluster/controllers.txt | tr '\n' ' ')
case ${HELM_TEST_SCOPE:-all} in
  all)
    controllers=$all_controllers
    disabled=broadcastjob
    ;;
  minimal)
    controllers="cloneset-ctl imagepulljob-ctl"
    disabled=imagepulljob
    ;;
  *)
    echo "HELM_TEST_SCOPE: all or minimal" >&2
    exit 2
    ;;
esac
# What the phases check (tests/helm/tests/install.rs): how many controller Deployments, the
# one the upgrade disables, whether deletion protection runs.
export HELM_TEST_CONTROLLERS HELM_TEST_DISABLED=$disabled HELM_TEST_PROTECTION=0
HELM_TEST_CONTROLLERS=$(wc -w <<<"$controllers")
[[ " $controllers " != *" protection-ctl "* ]] || HELM_TEST_PROTECTION=1
BINS="$controllers daemon-agent kruise-helm-hook" tests/images.sh --push "$KRUISE_REGISTRY"

# Every controller (and the guard) on the real node, the agent at its containerd socket
# (under .local/, not /var/run), and the agent's reads granted by RBAC: the local
# apiserver's node-scoped authorizer is served by `make up`'s imagepulljob-ctl on the host,
# which does not run here (as deploy-local.sh).
cat >"$dir/values.yaml" <<VALUES
# Written by tests/helm/install.sh.
image:
  repository: $KRUISE_REGISTRY/kruise-rs
  tag: "$tag"
manager:
  nodeSelector: {node.kruise.io/real: "true"}
  tolerations:
  - {key: node.kruise.io/real, operator: Exists, effect: NoSchedule}
daemon:
  nodeSelector: {node.kruise.io/real: "true"}
  socketLocation: $(dirname "$KRUISE_CONTAINERD_SOCKET")
  socketFile: $(basename "$KRUISE_CONTAINERD_SOCKET")
  clusterReads: true
VALUES
for c in $all_controllers; do
  [[ " $controllers " == *" $c "* ]] || printf '%s:\n  enabled: false\n' "${c%-ctl}" >>"$dir/values.yaml"
done

# The CRDs as shipped first: a conversion left in URL form (a controller run on the host, the
# e2e harness) would get Helm's service form merged beside it, which the apiserver refuses
# ("exactly one of url or service"); controllers.sh crds puts the shipped form back.
tests/cluster/controllers.sh crds
log "installing release $release ($chart) with $dir/values.yaml"
helm upgrade --install "$release" "$chart" -n "$release_ns" --take-ownership \
  -f "$dir/values.yaml" --wait --timeout 10m
phase installed

log "upgrading: $disabled.enabled=false, featureGates=ResourcesDeletionProtection=true"
phase snapshot
helm upgrade "$release" "$chart" -n "$release_ns" --reuse-values \
  --set "$disabled.enabled=false" --set featureGates=ResourcesDeletionProtection=true \
  --wait --timeout 10m
phase upgraded

log "uninstalling while the CloneSet exists: the guard must refuse"
# helm itself (not the filtering wrapper): its error and the guard's log, in order, in one file.
if "$helm_bin" uninstall "$release" -n "$release_ns" --wait --timeout 5m >"$dir/refused.txt" 2>&1; then
  cat "$dir/refused.txt" >&2
  log "FAIL: helm uninstall went through while a CloneSet exists"
  exit 1
fi
cat "$dir/refused.txt" >&2
phase guard_held

log "uninstalling after the CloneSet is gone"
# The CloneSet itself (its Pods follow): a namespace deletion can be held up cluster-wide by
# objects other tests left of a kind whose conversion webhook is gone.
"$(tests/cluster/cluster.sh bin)/kubectl" delete clonesets.apps.kruise.io --all -n helm-test --wait=true --timeout=180s
"$(tests/cluster/cluster.sh bin)/kubectl" delete namespace helm-test --wait=false
if ! "$helm_bin" uninstall "$release" -n "$release_ns" --wait --timeout 5m >"$dir/uninstall.txt" 2>&1; then
  cat "$dir/uninstall.txt" >&2
  # In `make test` the e2e suites ran on this cluster before: objects of theirs can be left
  # in namespaces stuck Terminating (a conversion webhook gone with its test process), and
  # the guard rightly counts them. Only those may hold this uninstall back.
  if [ "${HELM_TEST_SCOPE:-all}" = minimal ] && grep -q 'refusing to uninstall' "$dir/uninstall.txt" &&
    ! grep -qE '(^|[ ,])helm-test/' "$dir/uninstall.txt"; then
    log "the guard refused for objects other tests left behind (above); uninstalling with --no-hooks"
    stuck_namespaces
    # Without --wait: the objects left behind sit in namespaces that do not finish
    # terminating, and Helm's wait then ran into its 5-minute timeout in CI ("context deadline
    # exceeded") while our own namespace terminated behind them. What uninstalling must remove is
    # checked by the `uninstalled` phase below.
    helm uninstall "$release" -n "$release_ns" --no-hooks
  else
    log "FAIL: helm uninstall after the CloneSet is gone"
    exit 1
  fi
fi
phase uninstalled
log "passed in $((SECONDS - started))s"
