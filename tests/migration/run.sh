#!/usr/bin/env bash
# make migration-test: a live cluster switched from upstream OpenKruise v1.9.0's
# kruise-manager to our controllers and back (not part of `make test`).
#
# A cluster of its own (tests/cluster/cluster.sh with KRUISE_LOCAL_DIR=target/migration/cluster
# and ports around MIGRATION_PORT_BASE=37000; the dev cluster and bench-compare's are never
# touched), with a kube-apiserver audit log (Metadata level, watches excluded). The steps:
#
#   1 upstream   kruise-manager v1.9.0 (tests/bench/upstream/build.sh, cached), outside the
#                cluster, installed as its chart installs it: the 18 CRDs of config/crd/bases
#                with the conversion patches config/crd/kustomization.yaml lists (a URL at
#                127.0.0.1 and its CA), every webhook of config/webhook/manifests.yaml (URLs),
#                leader election on (Lease kruise-system/kruise-manager), the feature
#                gates' defaults but ImagePullJobGate=true (as its chart sets it). The
#                workloads created and settled under it.
#   2 to ours    kruise-manager stopped, its Lease deleted (as a user would; MIGRATION_LEASE=
#                expire waits out its 15 s instead), its two webhook configurations deleted,
#                deploy/crds applied server-side, every controller of ours started
#                (tests/cluster/controllers.sh up). Checked: settled again, no Pod write by
#                ours in the audit log from their start, no Pod UID changed, no
#                ControllerRevision made. Then a rollout of each kind, driven by ours.
#   3 back       ours stopped (controllers.sh down, which removes their webhook
#                configurations and conversion), upstream's CRDs, conversion and webhooks
#                again, kruise-manager started. The same checks for it, and a rollout.
#
# The assertions are Rust (tests/e2e/tests/migration.rs, phases create/check/rollout/report);
# this script starts and stops processes. Every step runs even when one before failed, so
# one run reports all that fails. Results: a table on stdout, target/migration/summary.json
# and phase-*.json; logs (audit log, kruise-manager's, ours) in target/migration/cluster/logs/.
#
# Ports (MIGRATION_PORT_BASE=37000): apiserver +443, etcd +379/+380, controller-manager +257,
# scheduler +259, our controllers' admin ports from +100 and webhook ports from +200,
# kruise-manager's metrics +90, probes +91, webhook +92.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
out=$root/target/migration
state=$out/cluster
base=${MIGRATION_PORT_BASE:-37000}
lease_mode=${MIGRATION_LEASE:-delete}

export KRUISE_LOCAL_DIR=$state KRUISE_REAL_NODE=0
export KRUISE_APISERVER_PORT=$((base + 443)) KRUISE_ETCD_PORT=$((base + 379))
export KRUISE_KCM_PORT=$((base + 257)) KRUISE_SCHEDULER_PORT=$((base + 259))
# controllers.sh numbers our ports from these; cluster.sh names imagepulljob-ctl's.
export KRUISE_CTL_ADMIN_PORT=$((base + 100)) KRUISE_CTL_WEBHOOK_PORT=$((base + 200))
up_metrics=$((base + 90))
up_probe=$((base + 91))
up_webhook=$((base + 92))
kubeconfig=$state/kubeconfig
audit=$state/logs/audit.log
up_state=$state/kruise-manager

log() { echo "migration: $(date -u +%H:%M:%S) $*" >&2; }
die() { log "$*"; exit 1; }

command -v jq >/dev/null || die "jq is required (apt-get install jq)"
case $lease_mode in delete | expire) ;; *) die "MIGRATION_LEASE is delete or expire" ;; esac
for p in "$KRUISE_APISERVER_PORT" "$KRUISE_ETCD_PORT" $((KRUISE_ETCD_PORT + 1)) "$KRUISE_KCM_PORT" \
  "$KRUISE_SCHEDULER_PORT" "$up_metrics" "$up_probe" "$up_webhook" \
  "$KRUISE_CTL_ADMIN_PORT" "$KRUISE_CTL_WEBHOOK_PORT"; do
  if (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then
    die "port $p is taken (another migration-test? MIGRATION_PORT_BASE moves every port)"
  fi
done

run_start=$SECONDS
manager_bin=$("$root/tests/bench/upstream/build.sh" | tail -n 1)
upstream_dir=$(cd "$root/tests/bench/upstream" && GOFLAGS=-mod=readonly go list -m -f '{{.Dir}}' github.com/openkruise/kruise)
bin=$("$root/tests/cluster/cluster.sh" bin)
kc() { "$bin/kubectl" --kubeconfig "$kubeconfig" --request-timeout=30s "$@"; }

# Every binary first: the switch should not wait for a compiler.
log "building our controllers and the migration test"
(cd "$root" && cargo build --quiet $(grep -v '^#' tests/cluster/controllers.txt | sed 's/^/--bin /'))
# The test binary itself, run directly: a source file changed meanwhile (others work in
# this tree) must not put a rebuild between a switch and its check.
test_bin=$(cd "$root" && cargo test --quiet -p kruise-e2e --test e2e --no-run --message-format=json |
  jq -r 'select(.reason == "compiler-artifact" and .target.name == "e2e" and .executable != null) | .executable' | tail -n 1)
[ -x "$test_bin" ] || die "building the e2e test binary failed"

# --- steps that fail are recorded, the run goes on ----------------------------------------

failures=()
fail() { # step what
  log "FAILED: $1: $2"
  failures+=("$1: $2")
}

phase() { # label phase incoming [audit-from]
  log "$1: phase $2 (incoming $3)"
  if ! (cd "$root/tests/e2e" && MIGRATION_PHASE=$2 MIGRATION_LABEL=$1 MIGRATION_INCOMING=$3 \
    MIGRATION_AUDIT_FROM=${4:-0} MIGRATION_AUDIT=$audit MIGRATION_OUT=$out \
    MIGRATION_WALL_SECONDS=$((SECONDS - run_start)) KUBECONFIG=$kubeconfig RUST_BACKTRACE=0 \
    "$test_bin" --ignored --exact migration::phase --nocapture); then
    fail "$1" "phase $2 failed (see above and $out/phase-$1-$2.json)"
  fi
}

audit_size() { stat -c %s "$audit"; }

# --- the cluster --------------------------------------------------------------------------

manager_pid=
stop_manager() {
  [ -n "$manager_pid" ] || return 0
  kill "$manager_pid" 2>/dev/null || true
  for _ in $(seq 1 40); do kill -0 "$manager_pid" 2>/dev/null || break; sleep 0.25; done
  kill -9 "$manager_pid" 2>/dev/null || true
  manager_pid=
}
cleanup() {
  stop_manager
  "$root/tests/cluster/controllers.sh" down >/dev/null 2>&1 || true
  "$root/tests/cluster/cluster.sh" down >/dev/null 2>&1 || true
  log "migration cluster down"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# A fresh cluster every run: a leftover of an interrupted run (same state dir, own pids) first.
"$root/tests/cluster/controllers.sh" down >/dev/null 2>&1 || true
"$root/tests/cluster/cluster.sh" down >/dev/null 2>&1 || true
rm -rf "$state/etcd" "$up_state"
rm -f "$out"/phase-*.json "$out"/summary.json "$out"/snapshot.json
mkdir -p "$state/logs"
rm -f "$audit"
cat >"$state/audit-policy.yaml" <<'EOF'
apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
- level: None
  verbs: [watch]
- level: Metadata
EOF
log "starting the migration cluster (state $state, apiserver :$KRUISE_APISERVER_PORT)"
KRUISE_APISERVER_ARGS="--audit-policy-file $state/audit-policy.yaml --audit-log-path $audit \
--audit-log-format json --audit-log-mode blocking --audit-log-maxsize 100000" \
  "$root/tests/cluster/cluster.sh" up
for ns in kruise-system kruise-daemon-config; do kc create namespace "$ns" >/dev/null; done

# --- upstream -----------------------------------------------------------------------------

# kruise-manager's CA (its WEBHOOK_CERT_DIR, kept for the run): the caBundle of what points
# at it. Empty before its first start; it then writes the bundle itself.
ca_bundle() {
  [ -f "$up_state/certs/ca-cert.pem" ] && base64 -w0 "$up_state/certs/ca-cert.pem"
  return 0
}

# The CRDs whose conversion upstream's config/crd/kustomization.yaml patches in
# (patches/webhook_in_*.yaml, the lines not commented out).
conversion_crds() {
  local p
  for p in $(sed -n 's/^- \(patches\/webhook_in_.*\.yaml\)$/\1/p' "$upstream_dir/config/crd/kustomization.yaml"); do
    sed -n 's/^  name: //p' "$upstream_dir/config/crd/$p" | head -n 1
  done
}

install_upstream() { # step
  local url="https://127.0.0.1:$up_webhook" ca names
  ca=$(ca_bundle)
  names=$(conversion_crds | jq -R . | jq -s .)
  # The 18 CRDs, conversion as the chart has it (a service there, a URL here).
  if ! kc create --dry-run=client -o json -f "$upstream_dir/config/crd/bases/" |
    jq -c --argjson names "$names" --arg url "$url/convert" --arg ca "$ca" '
      (if .kind == "List" then .items[] else . end)
      | if (.metadata.name | IN($names[])) then
          .spec.conversion = {strategy: "Webhook", webhook: {
            clientConfig: ({url: $url} + (if $ca == "" then {} else {caBundle: $ca} end)),
            conversionReviewVersions: ["v1", "v1beta1"]}}
        else . end' | jq -s '{apiVersion: "v1", kind: "List", items: .}' |
    kc apply --server-side --force-conflicts -f - >"$state/logs/apply-upstream-crds.log" 2>&1; then
    fail "$1" "applying upstream's CRDs: $(tail -n 5 "$state/logs/apply-upstream-crds.log" | tr '\n' ' ')"
  fi
  kc wait --for condition=established --timeout=60s -f "$upstream_dir/config/crd/bases/" >/dev/null ||
    fail "$1" "upstream's CRDs not established"
  # Every webhook of config/webhook/manifests.yaml, in the configurations kruise-manager
  # looks for, created fresh (it keeps their first webhook list in a `template` annotation).
  kc delete mutatingwebhookconfiguration kruise-mutating-webhook-configuration --ignore-not-found >/dev/null
  kc delete validatingwebhookconfiguration kruise-validating-webhook-configuration --ignore-not-found >/dev/null
  local kind name
  for kind in Mutating Validating; do
    name=kruise-$(tr '[:upper:]' '[:lower:]' <<<"$kind")-webhook-configuration
    if ! kc create --dry-run=client -o json -f "$upstream_dir/config/webhook/manifests.yaml" |
      jq --arg kind "${kind}WebhookConfiguration" --arg name "$name" --arg url "$url" --arg ca "$ca" '
        (if .kind == "List" then .items[] else . end)
        | select(.kind == $kind)
        | .metadata = {name: $name}
        | .webhooks |= map(.clientConfig = ({url: ($url + .clientConfig.service.path)}
            + (if $ca == "" then {} else {caBundle: $ca} end)))' |
      kc create -f - >/dev/null; then
      fail "$1" "creating $name"
    fi
  done
}

start_manager() { # step
  mkdir -p "$up_state/certs" "$up_state/protection"
  KUBECONFIG=$kubeconfig \
    WEBHOOK_HOST=127.0.0.1 WEBHOOK_PORT=$up_webhook WEBHOOK_CERT_DIR=$up_state/certs \
    setsid "$manager_bin" --enable-leader-election=true --leader-election-namespace=kruise-system \
    --metrics-addr=127.0.0.1:$up_metrics --health-probe-addr=127.0.0.1:$up_probe \
    --enable-pprof=false --protection-log-path="$up_state/protection" \
    --feature-gates=ImagePullJobGate=true \
    >>"$state/logs/kruise-manager.log" 2>&1 </dev/null &
  manager_pid=$!
  local deadline=$((SECONDS + 240))
  until curl -sf "http://127.0.0.1:$up_probe/readyz" >/dev/null 2>&1 &&
    [ -n "$(kc -n kruise-system get lease kruise-manager -o jsonpath='{.spec.holderIdentity}' 2>/dev/null)" ]; do
    if ! kill -0 "$manager_pid" 2>/dev/null; then
      fail "$1" "kruise-manager exited; see $state/logs/kruise-manager.log"
      manager_pid=
      return 1
    fi
    if [ $SECONDS -ge $deadline ]; then
      fail "$1" "kruise-manager not ready and leading after 240 s"
      return 1
    fi
    sleep 0.5
  done
  log "$1: kruise-manager ready and leading (pid $manager_pid)"
}

# Until the caBundle kruise-manager wrote is in every CRD conversion and webhook: before
# that, a write through them fails.
wait_upstream_wired() {
  local deadline=$((SECONDS + 60)) missing
  while [ $SECONDS -lt $deadline ]; do
    missing=$( {
      kc get crd -o json | jq -r '.items[] | select(.spec.conversion.strategy == "Webhook")
        | select((.spec.conversion.webhook.clientConfig.caBundle // "") == "") | .metadata.name'
      kc get mutatingwebhookconfiguration kruise-mutating-webhook-configuration -o json |
        jq -r '.webhooks[] | select((.clientConfig.caBundle // "") == "") | .name'
      kc get validatingwebhookconfiguration kruise-validating-webhook-configuration -o json |
        jq -r '.webhooks[] | select((.clientConfig.caBundle // "") == "") | .name'
    } 2>&1)
    [ -z "$missing" ] && return 0
    sleep 0.5
  done
  fail "$1" "without a caBundle after 60 s: $(tr '\n' ' ' <<<"$missing")"
}

# --- 1: under upstream --------------------------------------------------------------------

step=1-upstream
log "$step: installing upstream's CRDs (conversion) and webhooks, starting kruise-manager v1.9.0"
: >"$state/logs/kruise-manager.log"
install_upstream "$step"
start_manager "$step" || die "kruise-manager did not start: nothing to migrate from"
wait_upstream_wired "$step"
phase "$step" create upstream

# --- 2: switch to ours --------------------------------------------------------------------

step=2-to-ours
log "$step: stopping kruise-manager"
stop_manager
if [ "$lease_mode" = delete ]; then
  kc -n kruise-system delete lease kruise-manager --ignore-not-found >/dev/null
else
  log "$step: waiting out kruise-manager's Lease (15 s)"
  sleep 16
fi
kc delete mutatingwebhookconfiguration kruise-mutating-webhook-configuration --ignore-not-found >/dev/null
kc delete validatingwebhookconfiguration kruise-validating-webhook-configuration --ignore-not-found >/dev/null
# kruise-manager's conversion (a URL here, its Service in a chart install, which
# controllers.sh resets itself): server-side apply cannot remove what another field
# manager wrote, and a leftover webhook next to our `strategy: None` is refused. Reset to
# None, as controllers.sh does for the Service; our controllers register their own.
for name in $(kc get crd -o json | jq -r --arg p "https://127.0.0.1:$up_webhook/" \
  '.items[] | select((.spec.conversion.webhook.clientConfig.url // "") | startswith($p)) | .metadata.name'); do
  kc patch crd "$name" --type=merge -p '{"spec":{"conversion":{"strategy":"None","webhook":null}}}' >/dev/null ||
    fail "$step" "resetting the conversion of $name"
done
log "$step: applying deploy/crds over upstream's (controllers.sh crds: server-side, --force-conflicts)"
if ! "$root/tests/cluster/controllers.sh" crds >"$state/logs/apply-our-crds.log" 2>&1; then
  fail "$step" "applying deploy/crds: $(grep -v '^\s*$' "$state/logs/apply-our-crds.log" | tail -n 5 | tr '\n' ' ')"
fi
from=$(audit_size)
log "$step: starting our controllers (audit log from byte $from)"
if ! "$root/tests/cluster/controllers.sh" up 2>"$state/logs/controllers-up.log"; then
  fail "$step" "controllers.sh up: $(tail -n 8 "$state/logs/controllers-up.log" | tr '\n' ' ')"
fi
phase "$step" check ours "$from"
phase "$step" rollout ours

# --- 3: switch back -----------------------------------------------------------------------

step=3-to-upstream
log "$step: stopping our controllers"
"$root/tests/cluster/controllers.sh" down || fail "$step" "controllers.sh down"
ours_urls=$("$root/tests/cluster/controllers.sh" list | awk '{print "https://127.0.0.1:" $3 "/"}' | jq -R . | jq -s -c .)
left=$(
  for kind in mutatingwebhookconfigurations validatingwebhookconfigurations; do
    kc get "$kind" -o json | jq -r --argjson urls "$ours_urls" \
      '.items[] | select(any(.webhooks[]?; (.clientConfig.url // "") as $u | any($urls[]; . as $p | $u | startswith($p))))
       | .metadata.name'
  done
)
if [ -n "$left" ]; then
  log "$step: webhook configurations of ours left after controllers.sh down: $(tr '\n' ' ' <<<"$left"); deleting them"
  for name in $left; do
    kc delete mutatingwebhookconfiguration "$name" --ignore-not-found >/dev/null
    kc delete validatingwebhookconfiguration "$name" --ignore-not-found >/dev/null
  done
fi
install_upstream "$step"
from=$(audit_size)
log "$step: starting kruise-manager (audit log from byte $from)"
start_manager "$step" && wait_upstream_wired "$step"
phase "$step" check upstream "$from"
phase "$step" rollout upstream

# --- the report -----------------------------------------------------------------------------

stop_manager
wall=$((SECONDS - run_start))
phase report report upstream
jq --argjson wall "$wall" --argjson steps "$(printf '%s\n' ${failures[@]+"${failures[@]}"} | jq -R . | jq -s 'map(select(. != ""))')" \
  '. + {wall_seconds: $wall, step_failures: $steps}' "$out/summary.json" >"$out/summary.json.tmp" &&
  mv "$out/summary.json.tmp" "$out/summary.json"
log "wall time ${wall} s; results in target/migration/summary.json, logs in $state/logs/"
if [ ${#failures[@]} -gt 0 ]; then
  log "${#failures[@]} step(s) failed:"
  printf '  %s\n' "${failures[@]}" >&2
  exit 1
fi
log "migration passed both ways"
