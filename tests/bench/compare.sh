#!/usr/bin/env bash
# make bench-compare: our cloneset-ctl against upstream OpenKruise's kruise-manager v1.9.0,
# side by side, in one run on one cluster (not part of `make test`).
#
# A second local cluster of its own (tests/cluster/cluster.sh with KRUISE_LOCAL_DIR and
# other ports; the dev cluster at the default ports is never touched), with a kube-apiserver
# audit log at Metadata level (watches excluded). On it, one implementation after the
# other, each with its own CRDs and nothing left between them:
#
#   ours      cloneset-ctl (release build), cluster-wide with its webhooks and CRD
#             conversion, deploy/crds (v1alpha1 stored), the CloneSet created as v1alpha1
#   upstream  kruise-manager v1.9.0 (tests/bench/upstream/build.sh, cached), outside the
#             cluster: WEBHOOK_HOST/PORT/CERT_DIR, upstream's own CRDs (config/crd/bases,
#             v1beta1 stored), the CloneSet webhooks of config/webhook/manifests.yaml in
#             kruise-{mutating,validating}-webhook-configuration (created fresh each run),
#             the CloneSet created as v1beta1 (its controller's version)
#
# Same client limits for both: 30 QPS, burst 50, 3 CloneSet workers. The workload: a
# CloneSet of BENCH_PODS (default 1000) Pods, InPlaceIfPossible, maxUnavailable 20%, on kwok
# nodes. Phases, each timed until the status describes the current generation:
#
#   scale     create the CloneSet -> N Ready
#   inplace   JSON-patch the image -> N updated and Ready (in place)
#   restart   the process stopped and started again with the N Pods in place -> ready
#             (its /readyz) and idle (3 s without a request); what it asked and wrote
#             meanwhile (nothing needs writing: the Pod writes should be 0)
#
# Per phase, from the audit log by User-Agent (ours: cloneset-ctl/<version>, upstream:
# kruise-manager): Pod writes per Pod by verb (create/patch/update/delete, status
# subresource included), Pod GETs, 409 conflicts, every request per Pod; CPU seconds of the
# process. Per implementation: peak RSS (VmHWM), RSS at the end (VmRSS), RSS idle without
# Pods and after the restart with N Pods cached (their difference / N: bytes per cached Pod).
# A table on stdout, everything in target/bench/compare.json; the audit log and the
# controllers' logs stay in target/bench/cluster/logs/ until the next run.
#
# Knobs: BENCH_PODS=1000, BENCH_ONLY=ours|upstream (one side only, for debugging),
# BENCH_INPLACE=0 (leave the in-place phase out: at 10 000 Pods it is most of an hour a side;
# peak RSS is then that of the scale-up),
# BENCH_CTL_BIN (default target/release/cloneset-ctl; the static one of `make images` works),
# BENCH_PORT_BASE=17000 (below the ephemeral port range, where a client socket can take a
# port: 36380 once was; apiserver +443, etcd +379/+380, controller-manager +257,
# scheduler +259, our admin +80 and webhook +81, upstream's metrics +90, probes +91,
# webhook +92).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
pods=${BENCH_PODS:-1000}
only=${BENCH_ONLY:-}
inplace_phase=${BENCH_INPLACE:-1}
out=$root/target/bench
state=$out/cluster
base=${BENCH_PORT_BASE:-17000}
qps=30
burst=50
workers=3

export KRUISE_LOCAL_DIR=$state KRUISE_REAL_NODE=0
export KRUISE_APISERVER_PORT=$((base + 443)) KRUISE_ETCD_PORT=$((base + 379))
export KRUISE_KCM_PORT=$((base + 257)) KRUISE_SCHEDULER_PORT=$((base + 259))
ours_admin=$((base + 80))
ours_webhook=$((base + 81))
up_metrics=$((base + 90))
up_probe=$((base + 91))
up_webhook=$((base + 92))
kubeconfig=$state/kubeconfig
audit=$state/logs/audit.log
ns=bench

log() { echo "bench-compare: $(date -u +%H:%M:%S) $*" >&2; }
die() { log "$*"; exit 1; }

command -v jq >/dev/null || die "jq is required (apt-get install jq)"
case $only in "" | ours | upstream) ;; *) die "BENCH_ONLY is ours or upstream" ;; esac
[[ $pods =~ ^[1-9][0-9]*$ ]] || die "BENCH_PODS must be a positive number"
case $inplace_phase in 0 | 1) ;; *) die "BENCH_INPLACE is 0 or 1" ;; esac

for p in "$KRUISE_APISERVER_PORT" "$KRUISE_ETCD_PORT" $((KRUISE_ETCD_PORT + 1)) "$KRUISE_KCM_PORT" \
  "$KRUISE_SCHEDULER_PORT" "$ours_admin" "$ours_webhook" "$up_metrics" "$up_probe" "$up_webhook"; do
  if (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then
    die "port $p is taken (another bench-compare? BENCH_PORT_BASE moves every port)"
  fi
done

ctl_bin=${BENCH_CTL_BIN:-$root/target/release/cloneset-ctl}
[ "$only" = upstream ] || [ -x "$ctl_bin" ] || die "build it first: cargo build --release -p cloneset-ctl (make bench-compare does)"
manager_bin=$("$here/upstream/build.sh" | tail -n 1)
upstream_dir=$(cd "$here/upstream" && GOFLAGS=-mod=readonly go list -m -f '{{.Dir}}' github.com/openkruise/kruise)
bin=$("$root/tests/cluster/cluster.sh" bin)
kc() { "$bin/kubectl" --kubeconfig "$kubeconfig" "$@"; }

# --- the cluster ------------------------------------------------------------------------

started_pids=()
cleanup() {
  local pid
  for pid in ${started_pids[@]+"${started_pids[@]}"}; do
    kill "$pid" 2>/dev/null || true
  done
  for pid in ${started_pids[@]+"${started_pids[@]}"}; do
    for _ in $(seq 1 40); do kill -0 "$pid" 2>/dev/null || break; sleep 0.25; done
    kill -9 "$pid" 2>/dev/null || true
  done
  "$root/tests/cluster/cluster.sh" down >/dev/null 2>&1 || true
  log "bench cluster down"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

mkdir -p "$state/logs"
# A fresh cluster every run: a leftover of an interrupted run (same state dir, own pids) first.
"$root/tests/cluster/cluster.sh" down >/dev/null 2>&1 || true
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
log "starting the bench cluster (state $state, apiserver :$KRUISE_APISERVER_PORT)"
KRUISE_APISERVER_ARGS="--audit-policy-file $state/audit-policy.yaml --audit-log-path $audit \
--audit-log-format json --audit-log-mode blocking --audit-log-maxsize 100000" \
  "$root/tests/cluster/cluster.sh" up

# kwok nodes enough for N Pods (the cluster's 4 hold 440), the same for both.
KUBECONFIG=$kubeconfig "$root/tests/cluster/kwok-nodes.sh" bench "$pods"
kc create namespace kruise-system >/dev/null

# --- measuring --------------------------------------------------------------------------

audit_size() { stat -c %s "$audit"; }

# Audit events of one user agent (prefix) between two byte offsets, summed up.
summarize() { # from to ua-prefix
  head -c "$2" "$audit" | tail -c +$(($1 + 1)) | jq -n --arg ua "$3" '
    def key: (.objectRef.resource // "nonResource") + (if .objectRef.subresource then "/" + .objectRef.subresource else "" end);
    reduce (inputs | select((.userAgent // "") | startswith($ua))) as $e (
      {requests: 0, pods: {}, pod_codes: {}, by_resource: {}, user_agents: {}};
      .requests += 1
      | .user_agents[$e.userAgent] += 1
      | .by_resource[($e | key) + " " + $e.verb] += 1
      | if $e.objectRef.resource == "pods" then
          .pods[$e.verb + (if $e.objectRef.subresource then " " + $e.objectRef.subresource else "" end)] += 1
          | .pod_codes[($e.responseStatus.code // 0 | tostring)] += 1
        else . end)'
}

# Waits until the process has made no request for 3 s (at most 60 s + 1 s per 20 Pods):
# writes that follow the observed end of a phase (a last status update, Events still
# queued) count to that phase.
quiesce() { # ua-prefix
  local last=-1 n stable=0 deadline=$((SECONDS + 60 + pods / 20)) from
  from=$(audit_size)
  while [ $SECONDS -lt $deadline ]; do
    n=$(tail -c +$((from + 1)) "$audit" | grep -c "\"userAgent\":\"$1" || true)
    if [ "$n" = "$last" ]; then
      stable=$((stable + 1))
      [ $stable -ge 6 ] && return 0
    else
      stable=0
    fi
    last=$n
    sleep 0.5
  done
  log "$1 still making requests; counting on"
}

cpu_seconds() { # pid
  local ticks
  ticks=$(awk '{print $14 + $15}' "/proc/$1/stat")
  awk -v t="$ticks" -v hz="$(getconf CLK_TCK)" 'BEGIN {printf "%.2f", t / hz}'
}
mem_kib() { # pid field
  awk -v f="$2:" '$1 == f {print $2}' "/proc/$1/status"
}

now() { date +%s.%N; }
sub() { awk -v a="$1" -v b="$2" 'BEGIN {printf "%.2f", a - b}'; }

# Polls the CloneSet until the status describes the current generation and says done.
wait_done() { # resource what jq-condition timeout
  local deadline=$((SECONDS + $4)) status=""
  while [ $SECONDS -lt $deadline ]; do
    if status=$(kc -n "$ns" get "$1" bench -o json 2>/dev/null | jq -r --argjson n "$pods" "
        (.status // {}) as \$s
        | if (\$s.observedGeneration // 0) == .metadata.generation and ($3) then \"done\"
          else \"replicas \(\$s.replicas // 0) ready \(\$s.readyReplicas // 0) updatedReady \(\$s.updatedReadyReplicas // 0)\" end"); then
      [ "$status" = done ] && return 0
    fi
    sleep 0.5
  done
  die "timed out after $4 s waiting for $2 ($status)"
}

scale_done='$s.replicas == $n and $s.readyReplicas == $n'
update_done='$s.replicas == $n and $s.readyReplicas == $n and $s.updatedReplicas == $n and $s.updatedReadyReplicas == $n'

# One implementation: started by its start function (which sets $started_pid once the
# process is ready); the CloneSet is created, scaled, updated in place; the process is
# restarted with the N Pods in place (time until ready and idle, the requests and writes it
# makes doing nothing); the CloneSet is deleted. Writes $out/compare-<name>.json.
measure() { # name start-function resource ua-prefix manifest-json
  local name=$1 start=$2 resource=$3 ua=$4 manifest=$5
  "$start"
  local pid=$started_pid
  kc create namespace "$ns" >/dev/null
  quiesce "$ua"
  local idle_rss
  idle_rss=$(mem_kib "$pid" VmRSS)
  local o0 c0 t0 t1 o1 c1 t2 t3 o2 c2
  o0=$(audit_size) c0=$(cpu_seconds "$pid")
  log "$name: creating a CloneSet of $pods"
  t0=$(now)
  kc -n "$ns" create -f - <<<"$manifest" >/dev/null
  wait_done "$resource" "$pods Ready" "$scale_done" 1800
  t1=$(now)
  log "$name: $pods Ready in $(sub "$t1" "$t0") s"
  quiesce "$ua"
  o1=$(audit_size) c1=$(cpu_seconds "$pid")
  t2=$(now)
  if [ "$inplace_phase" = 1 ]; then
    log "$name: changing the image (in place)"
    kc -n "$ns" patch "$resource" bench --type=json \
      -p '[{"op":"replace","path":"/spec/template/spec/containers/0/image","value":"nginx:1.27"}]' >/dev/null
    wait_done "$resource" "$pods updated in place" "$update_done" 1800
    log "$name: $pods updated in place in $(sub "$(now)" "$t2") s"
    quiesce "$ua"
  fi
  t3=$(now)
  o2=$(audit_size) c2=$(cpu_seconds "$pid")
  local hwm rss
  hwm=$(mem_kib "$pid" VmHWM) rss=$(mem_kib "$pid" VmRSS)
  local inplace_restarts
  inplace_restarts=$(kc -n "$ns" get pods -o json | jq '[.items[].status.containerStatuses[0].restartCount] | add')
  log "$name: restarting it with $pods Pods in place"
  stop_pid "$pid"
  local o3 t4 t5 t6 o4 c4
  o3=$(audit_size) t4=$(now)
  "$start"
  pid=$started_pid t5=$(now)
  quiesce "$ua"
  # quiesce returns after 3 s without a request: the process was idle 3 s earlier.
  t6=$(sub "$(now)" 3) o4=$(audit_size) c4=$(cpu_seconds "$pid")
  log "$name: ready $(sub "$t5" "$t4") s and idle $(sub "$t6" "$t4") s after its restart"
  local restart_rss
  restart_rss=$(mem_kib "$pid" VmRSS)
  local scale inplace restart
  scale=$(summarize "$o0" "$o1" "$ua")
  inplace=$(summarize "$o1" "$o2" "$ua")
  restart=$(summarize "$o3" "$o4" "$ua")
  jq -n --arg name "$name" --argjson pods "$pods" \
    --argjson scale "$scale" --argjson inplace "$inplace" --argjson restart "$restart" \
    --arg ts "$(sub "$t1" "$t0")" --arg tu "$(sub "$t3" "$t2")" \
    --arg cs "$(sub "$c1" "$c0")" --arg cu "$(sub "$c2" "$c1")" \
    --arg tr "$(sub "$t5" "$t4")" --arg ti "$(sub "$t6" "$t4")" --arg cr "$c4" \
    --argjson idle_rss "$idle_rss" --argjson restart_rss "$restart_rss" \
    --argjson hwm "$hwm" --argjson rss "$rss" --argjson restarts "$inplace_restarts" \
    --argjson with_inplace "$inplace_phase" '
    def r2: . * 100 | round / 100;
    def phase($p; $secs; $cpu): {
      seconds: ($secs | tonumber | r2),
      cpu_seconds: ($cpu | tonumber | r2),
      pod_requests: $p.pods,
      pod_response_codes: $p.pod_codes,
      pod_writes_per_pod: ([$p.pods | to_entries[] | select(.key | test("^(create|patch|update|delete)")) | .value] | add // 0 | . / $pods | r2),
      pod_writes_per_pod_by_verb: ($p.pods | with_entries(select(.key | test("^(create|patch|update|delete)")) | .value = (.value / $pods | r2))),
      pod_gets_per_pod: (($p.pods.get // 0) / $pods | r2),
      pod_conflicts_per_pod: (($p.pod_codes["409"] // 0) / $pods | r2),
      requests: $p.requests,
      requests_per_pod: ($p.requests / $pods | r2),
      qps_floor_seconds: ($p.requests / 30 | r2),
      requests_by_resource: $p.by_resource,
      user_agents: $p.user_agents
    };
    {implementation: $name, pods: $pods,
     scale: phase($scale; $ts; $cs),
     inplace: (if $with_inplace == 1 then phase($inplace; $tu; $cu) + {container_restarts: $restarts} else null end),
     restart: {
       ready_seconds: ($tr | tonumber | r2),
       idle_seconds: ($ti | tonumber | r2),
       cpu_seconds: ($cr | tonumber | r2),
       requests: $restart.requests,
       requests_by_resource: $restart.by_resource,
       pod_writes: ([$restart.pods | to_entries[] | select(.key | test("^(create|patch|update|delete)")) | .value] | add // 0),
       rss_mib: ($restart_rss / 1024 | . * 10 | round / 10)},
     idle_rss_mib: ($idle_rss / 1024 | . * 10 | round / 10),
     bytes_per_cached_pod: ((($restart_rss - $idle_rss) * 1024 / $pods) | round),
     peak_rss_mib: ($hwm / 1024 | . * 10 | round / 10),
     rss_at_end_mib: ($rss / 1024 | . * 10 | round / 10)}' >"$out/compare-$name.json"
  log "$name: deleting the CloneSet and its Pods"
  kc delete namespace "$ns" --timeout=1800s >/dev/null
  stop_pid "$pid"
}

stop_pid() {
  kill "$1" 2>/dev/null || true
  for _ in $(seq 1 40); do kill -0 "$1" 2>/dev/null || break; sleep 0.25; done
  kill -9 "$1" 2>/dev/null || true
}

wait_ready() { # name pid url
  local deadline=$((SECONDS + 240))
  until curl -sf "$3" >/dev/null 2>&1; do
    kill -0 "$2" 2>/dev/null || die "$1 exited; see $state/logs/$1.log"
    [ $SECONDS -lt $deadline ] || die "$1 not ready after 240 s; see $state/logs/$1.log"
    sleep 0.5
  done
}

# --- ours -------------------------------------------------------------------------------

# With its CA in a Secret, as kustomize deploys it: a CA made anew at each start rewrites
# the CRD's conversion caBundle, which ends every CloneSet watch, and the restart phase
# then measured 2 s of relisting (2000 Pods: idle 2.74 s with it, 0.58 s without).
start_ours() {
  KUBECONFIG=$kubeconfig \
    KRUISE_ADMIN_ADDR=127.0.0.1:$ours_admin \
    KRUISE_WEBHOOK_ADDR=127.0.0.1:$ours_webhook \
    KRUISE_WEBHOOK_URL=https://127.0.0.1:$ours_webhook \
    KRUISE_NAMESPACE=kruise-system \
    KRUISE_WEBHOOK_CA_SECRET=cloneset-webhook-ca \
    KRUISE_LEADER_ELECT=false \
    KRUISE_KUBE_QPS=$qps KRUISE_KUBE_BURST=$burst KRUISE_WORKERS=$workers \
    setsid "$ctl_bin" >>"$state/logs/cloneset-ctl.log" 2>&1 </dev/null &
  started_pid=$!
  started_pids+=("$started_pid")
  wait_ready cloneset-ctl "$started_pid" "http://127.0.0.1:$ours_admin/readyz"
}

run_ours() {
  log "ours: installing deploy/crds, starting cloneset-ctl"
  kc apply --server-side --force-conflicts -f "$root/deploy/crds/" >/dev/null
  kc wait --for condition=established --timeout=60s -f "$root/deploy/crds/" >/dev/null
  : >"$state/logs/cloneset-ctl.log"
  measure ours start_ours clonesets.v1alpha1.apps.kruise.io "cloneset-ctl/" "$(jq -n --argjson n "$pods" '{
    apiVersion: "apps.kruise.io/v1alpha1", kind: "CloneSet", metadata: {name: "bench"},
    spec: {replicas: $n, selector: {matchLabels: {app: "bench"}},
      template: {metadata: {labels: {app: "bench"}}, spec: {containers: [{name: "main", image: "nginx:alpine"}]}},
      updateStrategy: {type: "InPlaceIfPossible", maxUnavailable: "20%"}}}')"
  jq '. + {binary: (.scale.user_agents | keys | first // "cloneset-ctl")}' "$out/compare-ours.json" >"$out/compare-ours.json.tmp"
  mv "$out/compare-ours.json.tmp" "$out/compare-ours.json"
  # What it registered (webhook configurations, the CRD conversion) points at a stopped
  # process now; then the CRDs go, with every object of theirs.
  local kind name url
  for kind in validatingwebhookconfigurations mutatingwebhookconfigurations; do
    while read -r name url; do
      [[ $url == "https://127.0.0.1:$ours_webhook"* ]] && kc delete "$kind" "$name" >/dev/null
    done < <(kc get "$kind" -o jsonpath='{range .items[*]}{.metadata.name}{" "}{.webhooks[0].clientConfig.url}{"\n"}{end}')
  done
  for name in $(kc get crd -o name); do
    kc patch "$name" --type=merge -p '{"spec":{"conversion":{"strategy":"None","webhook":null}}}' >/dev/null 2>&1 || true
  done
  kc delete -f "$root/deploy/crds/" --wait=true >/dev/null
}

# --- upstream ---------------------------------------------------------------------------

start_upstream() {
  KUBECONFIG=$kubeconfig \
    WEBHOOK_HOST=127.0.0.1 WEBHOOK_PORT=$up_webhook WEBHOOK_CERT_DIR=$state/kruise-manager/certs \
    setsid "$manager_bin" --enable-leader-election=false \
    --metrics-addr=127.0.0.1:$up_metrics --health-probe-addr=127.0.0.1:$up_probe \
    --enable-pprof=false --protection-log-path="$state/kruise-manager/protection" \
    --rest-config-qps=$qps --rest-config-burst=$burst --cloneset-workers=$workers \
    >>"$state/logs/kruise-manager.log" 2>&1 </dev/null &
  started_pid=$!
  started_pids+=("$started_pid")
  wait_ready kruise-manager "$started_pid" "http://127.0.0.1:$up_probe/readyz"
}

run_upstream() {
  log "upstream: installing $upstream_dir/config/crd/bases, starting kruise-manager v1.9.0"
  kc apply --server-side --force-conflicts -f "$upstream_dir/config/crd/bases/" >/dev/null
  kc wait --for condition=established --timeout=60s -f "$upstream_dir/config/crd/bases/" >/dev/null
  # Its CloneSet webhooks, in the configurations it expects to find (it keeps their first
  # webhook list in a `template` annotation: created fresh, never applied over).
  local webhooks
  webhooks=$(kc create --dry-run=client -o json -f "$upstream_dir/config/webhook/manifests.yaml")
  kc delete mutatingwebhookconfiguration kruise-mutating-webhook-configuration --ignore-not-found >/dev/null
  kc delete validatingwebhookconfiguration kruise-validating-webhook-configuration --ignore-not-found >/dev/null
  jq 'select(.kind == "MutatingWebhookConfiguration")
      | .metadata = {name: "kruise-mutating-webhook-configuration"}
      | .webhooks |= map(select(.name == "mcloneset.kb.io"))' <<<"$webhooks" | kc create -f - >/dev/null
  jq 'select(.kind == "ValidatingWebhookConfiguration")
      | .metadata = {name: "kruise-validating-webhook-configuration"}
      | .webhooks |= map(select(.name == "vcloneset.kb.io"))' <<<"$webhooks" | kc create -f - >/dev/null
  rm -rf "$state/kruise-manager"
  mkdir -p "$state/kruise-manager/certs" "$state/kruise-manager/protection"
  : >"$state/logs/kruise-manager.log"
  measure upstream start_upstream clonesets.v1beta1.apps.kruise.io "kruise-manager" "$(jq -n --argjson n "$pods" '{
    apiVersion: "apps.kruise.io/v1beta1", kind: "CloneSet", metadata: {name: "bench"},
    spec: {replicas: $n, selector: {matchLabels: {app: "bench"}},
      template: {metadata: {labels: {app: "bench"}}, spec: {containers: [{name: "main", image: "nginx:alpine"}]}},
      updateStrategy: {type: "RollingUpdate", rollingUpdate: {podUpdatePolicy: "InPlaceIfPossible", maxUnavailable: "20%"}}}}')"
  jq '. + {binary: "kruise-manager v1.9.0"}' "$out/compare-upstream.json" >"$out/compare-upstream.json.tmp"
  mv "$out/compare-upstream.json.tmp" "$out/compare-upstream.json"
  kc delete mutatingwebhookconfiguration kruise-mutating-webhook-configuration --ignore-not-found >/dev/null
  kc delete validatingwebhookconfiguration kruise-validating-webhook-configuration --ignore-not-found >/dev/null
  kc delete -f "$upstream_dir/config/crd/bases/" --wait=true >/dev/null
}

# --- the run ----------------------------------------------------------------------------

rm -f "$out"/compare-ours.json "$out"/compare-upstream.json
[ "$only" = upstream ] || run_ours
[ "$only" = ours ] || run_upstream

sides=()
[ -f "$out/compare-ours.json" ] && sides+=("$out/compare-ours.json")
[ -f "$out/compare-upstream.json" ] && sides+=("$out/compare-upstream.json")
jq -s --argjson pods "$pods" --arg cpus "$(nproc)" \
  '{pods: $pods, qps: 30, burst: 50, workers: 3, machine_cpus: ($cpus | tonumber),
    update_strategy: "InPlaceIfPossible, maxUnavailable 20%", results: .}' \
  "${sides[@]}" >"$out/compare.json"
rm -f "${sides[@]}"

# The table: one column per implementation.
jq -r '
  def verbs: to_entries | map("\(.key) \(.value)") | join(", ");
  def rows($p): [
    ["  wall time (s)", (.[] | .[$p].seconds | tostring)],
    ["  Pod writes / Pod", (.[] | .[$p].pod_writes_per_pod | tostring)],
    ["    by verb", (.[] | .[$p].pod_writes_per_pod_by_verb | verbs)],
    ["  Pod GETs / Pod", (.[] | .[$p].pod_gets_per_pod | tostring)],
    ["  409 conflicts / Pod", (.[] | .[$p].pod_conflicts_per_pod | tostring)],
    ["  all requests / Pod", (.[] | .[$p].requests_per_pod | tostring)],
    ["  requests / 30 QPS (s)", (.[] | .[$p].qps_floor_seconds | tostring)],
    ["  CPU (s)", (.[] | .[$p].cpu_seconds | tostring)]];
  .pods as $n | .results as $r
  | (["", ($r[] | .binary)]),
    (["scale 0 -> \($n) Ready", ($r[] | "")]),
    ($r | rows("scale")[]),
    (if $r[0].inplace then (["in-place rollout of \($n)", ($r[] | "")]), ($r | rows("inplace")[])
     else (["in-place rollout", ($r[] | "not run (BENCH_INPLACE=0)")]) end),
    (["restart with \($n) Pods", ($r[] | "")]),
    (["  ready (s)", ($r[] | .restart.ready_seconds | tostring)]),
    (["  ready and idle (s)", ($r[] | .restart.idle_seconds | tostring)]),
    (["  requests, Pod writes", ($r[] | "\(.restart.requests), \(.restart.pod_writes)")]),
    (["  RSS (MiB)", ($r[] | .restart.rss_mib | tostring)]),
    (["RSS idle, no Pods (MiB)", ($r[] | .idle_rss_mib | tostring)]),
    (["bytes per cached Pod", ($r[] | .bytes_per_cached_pod | tostring)]),
    (["peak RSS (MiB)", ($r[] | .peak_rss_mib | tostring)]),
    (["RSS at the end (MiB)", ($r[] | .rss_at_end_mib | tostring)])
  | map(. + "                                                  ")
  | (.[0][0:26]) + (.[1:] | map(.[0:48]) | join(""))' "$out/compare.json" | sed 's/ *$//'
log "written to target/bench/compare.json (audit log: $audit)"
