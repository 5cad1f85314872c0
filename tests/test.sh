#!/usr/bin/env bash
# `make test`: lint, unit tests, then the e2e tests on the local cluster. The control
# plane binaries (a Go build, ~15 min cold, cached afterwards) build in the background
# while Rust compiles and the unit tests run.
#
# The cluster has the real node real-0 (a kubelet + containerd on this machine, where
# containers really run) whenever this runs as root, as CI does: the node agent's, the
# in-place and the image tests then run for real. KRUISE_REAL_NODE=0 leaves it out (its
# tests then say that they skip); without root it is left out too.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
state=${KRUISE_LOCAL_DIR:-$root/.local}
mkdir -p .local/logs
started=$SECONDS

# Each step line says how much disk is left: CI runs on a fresh clone on a machine with other
# work's build trees beside it, and a full disk otherwise shows only as a failing build later.
step() { echo "== $* ($((SECONDS - started))s, $(df -h --output=avail . | tail -1 | tr -d ' ') free)"; }
# A fresh clone (CI) never reads cargo's incremental state again: several GB under
# target/debug/incremental for nothing.
if [ -n "${CI:-}" ]; then export CARGO_INCREMENTAL=0; fi
# KRUISE_K8S_VERSION=1.32|1.34|1.37 runs it all on that Kubernetes version (default 1.33).
# shellcheck source=cluster/k8s-version.sh
. tests/cluster/k8s-version.sh

real_node=${KRUISE_REAL_NODE:-}
if [ -z "$real_node" ]; then
  if [ "$(id -u)" -eq 0 ]; then real_node=1; else real_node=0; fi
fi
apiserver_pid=$state/run/kube-apiserver.pid
if [ "$real_node" = 1 ] && [ -f "$apiserver_pid" ] && kill -0 "$(cat "$apiserver_pid")" 2>/dev/null &&
  [ ! -f "$state/run/real-node" ]; then
  echo "make test: the local cluster is up without the real node, so its tests skip (make down first to include them)"
  real_node=0
fi
if [ "$real_node" = 1 ]; then
  step "the real node's packages"
  tests/deps.sh --real-node
fi

{
  "$k8s_dir/build.sh"
  if [ "$real_node" = 1 ]; then "$k8s_dir/build-node.sh"; fi
  # The e2e tests' Prometheus (with kubernetes_sd, which Debian's lacks): ~2 min, cached.
  tests/cluster/build-prometheus.sh
  # Helm, for the chart's lint and install test (~1 min, cached).
  tests/helm/build.sh
} >.local/logs/cluster-build.log 2>&1 &
build_pid=$!

step "lint"
cargo fmt --all -- --check
cargo clippy --workspace --all-targets --quiet -- -D warnings
# The API docs build without a broken link (a `[`name`]` that names nothing fails here).
RUSTDOCFLAGS="-D warnings" cargo doc --workspace --no-deps --quiet
# Our CRDs against OpenKruise v1.9.0's (a path upstream accepts and ours would prune fails).
tests/schema-parity/run.sh
step "unit tests"
cargo test --workspace --exclude kruise-e2e --quiet
step "waiting for the control plane build"
if ! wait "$build_pid"; then
  echo "building the control plane failed:" >&2
  tail -n 40 .local/logs/cluster-build.log >&2
  exit 1
fi
"$(tests/helm/build.sh)" lint --strict deploy/helm/kruise-rs
step "local cluster"
KRUISE_REAL_NODE=$real_node tests/cluster/cluster.sh up
# The controllers that the last step deploys from their images (static release builds,
# several CPU-minutes each): built in the background at the lowest priority while the e2e
# tests run.
# Measured in a cold run on 2 cores: the static build took 965 s at nice 19 beside the e2e
# tests and was done before they were; the deployed step itself about 2 minutes.
# KRUISE_DEPLOYED_TESTS=0 leaves it out.
deployed_bins="cloneset-ctl imagepulljob-ctl daemon-agent kruise-helm-hook"
deployed_tests=${KRUISE_DEPLOYED_TESTS:-1}
if [ "$real_node" = 1 ] && [ "$deployed_tests" = 1 ]; then
  NICE=19 BINS="$deployed_bins" tests/images.sh --local >.local/logs/images-build.log 2>&1 &
  images_pid=$!
fi
step "e2e tests"
# The real node's tests run in a step of their own below (on a cluster with real-0 they
# would run here too, twice then).
real_node_tests=(realnode:: imagepull::real_node)
KUBECONFIG="$root/.local/kubeconfig" cargo test -p kruise-e2e --quiet -- --test-threads="${E2E_THREADS:-6}" \
  --skip conversion:: "${real_node_tests[@]/#/--skip=}"
# The conversion tests point the CloneSet and SidecarSet CRDs at a webhook of their own and
# back: every change of a CRD's conversion ends all watches on that kind cluster-wide, which
# would disturb the tests running beside them. So they run alone, after the others.
step "e2e tests: CRD conversion"
KUBECONFIG="$root/.local/kubeconfig" cargo test -p kruise-e2e --quiet -- --test-threads=1 conversion::
# The real node's tests (realnode.rs, crr.rs's realnode module, imagepull.rs's
# real_node_*) when this cluster has one (started above when run as root); a kwok-only
# cluster has no container runtime for them to use.
if "$(tests/cluster/cluster.sh bin)/kubectl" --kubeconfig "$root/.local/kubeconfig" \
  get node real-0 >/dev/null 2>&1; then
  step "e2e tests: the real node real-0"
  KUBECONFIG="$root/.local/kubeconfig" KRUISE_E2E_REAL_NODE=1 \
    cargo test -p kruise-e2e --quiet -- --test-threads=3 "${real_node_tests[@]}"
  # The controllers as a user deploys them: images FROM scratch in the node's registry,
  # kustomize, 2 replicas on real-0 with a Lease; the agent as a DaemonSet Pod. Last,
  # since they act on every namespace (the kwok suite runs controllers of its own).
  if [ "$deployed_tests" != 1 ]; then
    step "e2e tests: controllers from their images: skipped (KRUISE_DEPLOYED_TESTS=0)"
  else
    step "e2e tests: controllers from their images on real-0 (deploy-local)"
    if [ -n "${images_pid:-}" ] && ! wait "$images_pid"; then
      echo "the static release build of $deployed_bins failed:" >&2
      tail -n 40 .local/logs/images-build.log >&2
      exit 1
    fi
    for overlay in cloneset imagepulljob; do
      OVERLAY=$overlay tests/deploy-local.sh
    done
    KUBECONFIG="$root/.local/kubeconfig" KRUISE_E2E_REAL_NODE=1 KRUISE_E2E_DEPLOYED=1 \
      cargo test -p kruise-e2e --quiet -- --test-threads=2 realnode::deployed_ imagepull::real_node_deployed_
    tests/deploy-local.sh delete
    # The Helm chart as a user installs it, with the same images: install (Ready, a CloneSet
    # of examples/ through the chart's webhooks), upgrade (a controller disabled, a gate
    # changed: its objects gone, the rest and the CloneSet's Pods untouched), the uninstall
    # guard refusing while the CloneSet exists, uninstall. `make helm-test` does it with
    # every controller.
    step "e2e tests: the Helm chart on real-0 (cloneset, imagepulljob, the node agent)"
    HELM_TEST_SCOPE=minimal tests/helm/install.sh
  fi
else
  step "e2e tests: the real node: skipped (no node real-0; make up-real adds it)"
fi
# The short version of `make chaos` (tests/chaos/run.sh, ~90 s), on a cluster of its own:
# the CloneSet leader killed -9 during a 30-Pod scale-out and in-place rollout, the
# webhooks down. The full one is `make chaos`.
step "chaos (short)"
cargo build --quiet --bin cloneset-ctl --bin sidecarset-ctl --bin chaos-proxy
CHAOS_OUT="$root/target/chaos-short" CHAOS_PODS=30 CHAOS_FIRST_KILL=1 CHAOS_KILL_EVERY=4 \
  CHAOS_CONTROLLERS="cloneset-ctl sidecarset-ctl" tests/chaos/run.sh leader-cloneset webhook-down
step "done"
