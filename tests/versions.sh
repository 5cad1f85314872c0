#!/usr/bin/env bash
# `make test-versions`: the kwok e2e suite on other Kubernetes versions than `make test`'s
# 1.33, one at a time, each on a cluster of its own (not part of make test).
#
# For each version of KRUISE_TEST_VERSIONS (default "1.32 1.37", the lowest and highest
# supported; docs/install.md "Supported Kubernetes versions"): build that version's control
# plane (tests/cluster/k8s-<v>/, cached per version: ~15-25 min of 2 cores the first time),
# start its cluster (state in .local/versions/<v>, no real node), run the e2e suite exactly
# as tests/test.sh's e2e step does (everything but conversion:: and the real node's tests,
# then conversion:: alone), write the counts to target/versions/<v>.txt (the full output
# beside it in <v>.log), and tear the cluster down.
#
# Ports: KRUISE_APISERVER_PORT / KRUISE_ETCD_PORT (and +1) / KRUISE_KCM_PORT /
# KRUISE_SCHEDULER_PORT are the first version's (default 26443 22379 30257 30259, apart
# from the default cluster's); each next version adds 10. The controllers' ports
# (controllers.sh: KRUISE_CTL_ADMIN_PORT, KRUISE_CTL_WEBHOOK_PORT, default 28080 and 29443,
# +100 per version) move too: the apiserver calls the node agent's authorizer on
# imagepulljob-ctl's webhook port, and a default cluster's imagepulljob-ctl on 19455 (make
# up) would answer with a certificate of another CA. E2E_THREADS as in make test (6).
# Exit status: non-zero when any version failed a test (every version still runs).
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
versions=${KRUISE_TEST_VERSIONS:-1.32 1.37}
out=$root/target/versions
states=${KRUISE_VERSIONS_DIR:-$root/.local/versions}
api_base=${KRUISE_APISERVER_PORT:-26443}
etcd_base=${KRUISE_ETCD_PORT:-22379}
kcm_base=${KRUISE_KCM_PORT:-30257}
scheduler_base=${KRUISE_SCHEDULER_PORT:-30259}
ctl_admin_base=${KRUISE_CTL_ADMIN_PORT:-28080}
ctl_webhook_base=${KRUISE_CTL_WEBHOOK_PORT:-29443}
threads=${E2E_THREADS:-6}
real_node_tests=(realnode:: imagepull::real_node)
mkdir -p "$out"

log() { echo "== test-versions: $*" >&2; }

# "test result: ok. 12 passed; 0 failed; 1 ignored; ..." lines of one cargo test run, summed.
counts() { # log
  awk '/^test result:/ {
         for (i = 1; i <= NF; i++) {
           if ($(i+1) ~ /^passed/) p += $i
           if ($(i+1) ~ /^failed/) f += $i
           if ($(i+1) ~ /^ignored/) g += $i
         }
       }
       END { printf "%d passed, %d failed, %d ignored\n", p, f, g }' "$1"
}

# The names cargo lists under its last "failures:" heading of each test binary.
failures() { # log
  awk '/^failures:$/ { list = 1; next }
       list && /^    [A-Za-z0-9_:]+$/ { sub(/^ +/, ""); print; next }
       list && !/^ *$/ { list = 0 }' "$1" | sort -u
}

status=0
i=0
for v in $versions; do
  export KRUISE_K8S_VERSION=$v KRUISE_REAL_NODE=0
  export KRUISE_LOCAL_DIR=$states/$v
  export KRUISE_APISERVER_PORT=$((api_base + 10 * i)) KRUISE_ETCD_PORT=$((etcd_base + 10 * i))
  export KRUISE_KCM_PORT=$((kcm_base + 10 * i)) KRUISE_SCHEDULER_PORT=$((scheduler_base + 10 * i))
  export KRUISE_CTL_ADMIN_PORT=$((ctl_admin_base + 100 * i)) KRUISE_CTL_WEBHOOK_PORT=$((ctl_webhook_base + 100 * i))
  export KUBECONFIG=$KRUISE_LOCAL_DIR/kubeconfig
  i=$((i + 1))
  txt=$out/$v.txt
  full=$out/$v.log
  started=$SECONDS
  log "Kubernetes $v: building (cached when built before)"
  bin=$(tests/cluster/cluster.sh bin)
  trap 'tests/cluster/cluster.sh down' EXIT
  log "Kubernetes $v: cluster up (apiserver :$KRUISE_APISERVER_PORT, state $KRUISE_LOCAL_DIR)"
  tests/cluster/cluster.sh up
  server=$("$bin/kubectl" version -o json | awk -F'"' '/"serverVersion"/ {s = 1} s && /"gitVersion"/ {print $4; exit}')
  log "Kubernetes $v: kube-apiserver $server; e2e tests"
  main_log=$out/$v.main.log
  conv_log=$out/$v.conversion.log
  rc=0
  cargo test -p kruise-e2e --quiet -- --test-threads="$threads" \
    --skip conversion:: "${real_node_tests[@]/#/--skip=}" 2>&1 | tee "$main_log" >&2 || rc=1
  log "Kubernetes $v: e2e tests: CRD conversion"
  cargo test -p kruise-e2e --quiet -- --test-threads=1 conversion:: 2>&1 | tee "$conv_log" >&2 || rc=1
  cat "$main_log" "$conv_log" >"$full"
  main_counts=$(counts "$main_log")
  conv_counts=$(counts "$conv_log")
  {
    echo "kubernetes: $v (kube-apiserver $server)"
    echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
    echo "commit: $(git rev-parse --short HEAD)$(git diff --quiet HEAD 2>/dev/null || echo ' + local changes')"
    echo "e2e (all but conversion:: and the real node's tests): $main_counts"
    echo "e2e conversion:: (one thread): $conv_counts"
    echo "result: $([ "$rc" = 0 ] && echo pass || echo FAIL) in $((SECONDS - started))s"
    failed=$(failures "$full")
    if [ -n "$failed" ]; then
      echo "failed tests:"
      sed 's/^/  /' <<<"$failed"
    fi
  } >"$txt"
  rm -f "$main_log" "$conv_log"
  [ "$rc" = 0 ] || status=1
  log "Kubernetes $v: $(tr '\n' ' ' <"$txt")"
  tests/cluster/cluster.sh down
  trap - EXIT
done
for v in $versions; do cat "$out/$v.txt"; echo; done
exit "$status"
