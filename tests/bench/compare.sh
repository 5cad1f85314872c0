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
# Same client limits for both: 30 QPS, burst 50, 3 CloneSet workers by default
# (BENCH_QPS, BENCH_BURST, BENCH_WORKERS: ours KRUISE_KUBE_QPS/_BURST/KRUISE_WORKERS,
# upstream --rest-config-qps/-burst and --cloneset-workers). A third side, the floor:
#
#   floor     bench-floor (tests/bench/floor), a client that makes exactly
#             the API-minimum requests for the same outcome (scale: N creates and one
#             status patch each; in place: per Pod InPlaceUpdateReady=False, the image,
#             InPlaceUpdateReady=True, 20% of the Pods at a time) at the same limits with
#             16 writes in flight (the controllers' bound) and no controller logic: the
#             fastest this cluster allows at these limits. Each side's wall time is also
#             given as a ratio to it.
#
# The workload: a
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
# Knobs: BENCH_PODS=1000, BENCH_ONLY=ours|upstream|floor (one side only, for debugging),
# BENCH_QPS=30, BENCH_BURST=50, BENCH_WORKERS=3,
# BENCH_INPLACE=0 (leave the in-place phase out: at 10 000 Pods it is most of an hour a side;
# peak RSS is then that of the scale-up),
# BENCH_CTL_BIN (default target/release/cloneset-ctl; the static one of `make images` works),
# BENCH_FLOOR_BIN (default target/release/bench-floor),
# BENCH_PERF=1 (perf samples each controller, 499 Hz, from the CloneSet's creation to its
# restart: target/bench/perf-<side>.txt, self time by binary and symbol; ours then defaults
# to target/profiling/cloneset-ctl, the release build with symbols, and
# make bench-compare builds that; BENCH_PERF=callgraph: DWARF call graphs at 99 Hz and
# time by symbol including callees, to see what the allocations and syscalls serve),
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
qps=${BENCH_QPS:-30}
burst=${BENCH_BURST:-50}
workers=${BENCH_WORKERS:-3}

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
case $only in "" | ours | upstream | floor) ;; *) die "BENCH_ONLY is ours, upstream or floor" ;; esac
[[ $qps =~ ^[1-9][0-9]*$ ]] || die "BENCH_QPS must be a positive whole number"
[[ $burst =~ ^[1-9][0-9]*$ ]] || die "BENCH_BURST must be a positive whole number"
[[ $workers =~ ^[1-9][0-9]*$ ]] || die "BENCH_WORKERS must be a positive whole number"
[[ $pods =~ ^[1-9][0-9]*$ ]] || die "BENCH_PODS must be a positive number"
case $inplace_phase in 0 | 1) ;; *) die "BENCH_INPLACE is 0 or 1" ;; esac

for p in "$KRUISE_APISERVER_PORT" "$KRUISE_ETCD_PORT" $((KRUISE_ETCD_PORT + 1)) "$KRUISE_KCM_PORT" \
  "$KRUISE_SCHEDULER_PORT" "$ours_admin" "$ours_webhook" "$up_metrics" "$up_probe" "$up_webhook"; do
  if (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then
    die "port $p is taken (another bench-compare? BENCH_PORT_BASE moves every port)"
  fi
done

perf=${BENCH_PERF:-0}
case $perf in 0 | 1 | callgraph) ;; *) die "BENCH_PERF is 0, 1 or callgraph" ;; esac
if [ "$perf" != 0 ]; then
  command -v perf >/dev/null || die "BENCH_PERF=1 needs perf (apt-get install linux-perf)"
  ctl_bin=${BENCH_CTL_BIN:-$root/target/profiling/cloneset-ctl}
else
  ctl_bin=${BENCH_CTL_BIN:-$root/target/release/cloneset-ctl}
fi
floor_bin=${BENCH_FLOOR_BIN:-$root/target/release/bench-floor}
case $only in "" | ours) [ -x "$ctl_bin" ] || die "build it first: cargo build --release -p cloneset-ctl (make bench-compare does)" ;; esac
case $only in "" | floor) [ -x "$floor_bin" ] || die "build it first: cargo build --release -p bench-floor (make bench-compare does)" ;; esac
case $only in
  "" | upstream)
    manager_bin=$("$here/upstream/build.sh" | tail -n 1)
    upstream_dir=$(cd "$here/upstream" && GOFLAGS=-mod=readonly go list -m -f '{{.Dir}}' github.com/openkruise/kruise)
    ;;
esac
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
  local perf_pid=""
  local perf_record=(-F 499) perf_report=(--no-children --sort dso,symbol)
  if [ "$perf" = callgraph ]; then
    perf_record=(-F 99 --call-graph dwarf,16384) perf_report=(--children --sort symbol -g none)
  fi
  if [ "$perf" != 0 ]; then
    perf record "${perf_record[@]}" -p "$pid" -o "$out/perf-$name.data" >>"$state/logs/perf-$name.log" 2>&1 &
    perf_pid=$!
  fi
  o0=$(audit_size) c0=$(cpu_seconds "$pid")
  log "$name: creating a CloneSet of $pods"
  t0=$(now)
  kc -n "$ns" create -f - <<<"$manifest" >/dev/null
  wait_done "$resource" "$pods Ready" "$scale_done" 1800
  t1=$(now)
  log "$name: $pods Ready in $(sub "$t1" "$t0") s"
  quiesce "$ua"
  o1=$(audit_size) c1=$(cpu_seconds "$pid")
  t2=$(now) t3=$t2
  if [ "$inplace_phase" = 1 ]; then
    log "$name: changing the image (in place)"
    kc -n "$ns" patch "$resource" bench --type=json \
      -p '[{"op":"replace","path":"/spec/template/spec/containers/0/image","value":"nginx:1.27"}]' >/dev/null
    wait_done "$resource" "$pods updated in place" "$update_done" 1800
    t3=$(now)
    log "$name: $pods updated in place in $(sub "$t3" "$t2") s"
    quiesce "$ua"
  fi
  o2=$(audit_size) c2=$(cpu_seconds "$pid")
  local hwm rss
  hwm=$(mem_kib "$pid" VmHWM) rss=$(mem_kib "$pid" VmRSS)
  local inplace_restarts
  inplace_restarts=$(kc -n "$ns" get pods -o json | jq '[.items[].status.containerStatuses[0].restartCount] | add')
  if [ -n "$perf_pid" ]; then
    kill -INT "$perf_pid" 2>/dev/null || true
    wait "$perf_pid" 2>/dev/null || true
    perf report -i "$out/perf-$name.data" --stdio "${perf_report[@]}" --percent-limit 0.3 \
      | grep -v '^#' | sed 's/  *$//' >"$out/perf-$name.txt" 2>>"$state/logs/perf-$name.log" || true
    log "$name: perf profile in $out/perf-$name.txt"
  fi
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
  jq -n --arg name "$name" --argjson pods "$pods" --argjson qps "$qps" \
    --argjson scale "$scale" --argjson inplace "$inplace" --argjson restart "$restart" \
    --arg ts "$(sub "$t1" "$t0")" --arg tu "$(sub "$t3" "$t2")" \
    --arg cs "$(sub "$c1" "$c0")" --arg cu "$(sub "$c2" "$c1")" \
    --arg tr "$(sub "$t5" "$t4")" --arg ti "$(sub "$t6" "$t4")" --arg cr "$c4" \
    --argjson idle_rss "$idle_rss" --argjson restart_rss "$restart_rss" \
    --argjson hwm "$hwm" --argjson rss "$rss" --argjson restarts "$inplace_restarts" \
    --argjson with_inplace "$inplace_phase" "$phase_jq"'
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

# One phase's figures from its audit summary ($p), wall time and CPU seconds ("" when
# not measured); $pods and $qps are bound by the caller.
phase_jq='
    def r2: . * 100 | round / 100;
    def phase($p; $secs; $cpu): {
      seconds: ($secs | tonumber | r2),
      cpu_seconds: (if $cpu == "" then null else $cpu | tonumber | r2 end),
      pod_requests: $p.pods,
      pod_response_codes: $p.pod_codes,
      pod_writes_per_pod: ([$p.pods | to_entries[] | select(.key | test("^(create|patch|update|delete)")) | .value] | add // 0 | . / $pods | r2),
      pod_writes_per_pod_by_verb: ($p.pods | with_entries(select(.key | test("^(create|patch|update|delete)")) | .value = (.value / $pods | r2))),
      pod_gets_per_pod: (($p.pods.get // 0) / $pods | r2),
      pod_conflicts_per_pod: (($p.pod_codes["409"] // 0) / $pods | r2),
      requests: $p.requests,
      requests_per_pod: ($p.requests / $pods | r2),
      qps_floor_seconds: ($p.requests / $qps | r2),
      requests_by_resource: $p.by_resource,
      user_agents: $p.user_agents
    };'

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
# No foreign Lease to watch for (KRUISE_FOREIGN_LEADER_LEASES empty): kruise-manager is
# stopped while ours runs, and the check's GET every 3 s would keep quiesce from ever
# seeing 3 s without a request.
start_ours() {
  KUBECONFIG=$kubeconfig \
    KRUISE_ADMIN_ADDR=127.0.0.1:$ours_admin \
    KRUISE_WEBHOOK_ADDR=127.0.0.1:$ours_webhook \
    KRUISE_WEBHOOK_URL=https://127.0.0.1:$ours_webhook \
    KRUISE_NAMESPACE=kruise-system \
    KRUISE_WEBHOOK_CA_SECRET=cloneset-webhook-ca \
    KRUISE_LEADER_ELECT=false KRUISE_FOREIGN_LEADER_LEASES= \
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

# --- the floor --------------------------------------------------------------------------

run_floor() {
  log "floor: bench-floor, the API-minimum client"
  local args=(--namespace "$ns" --pods "$pods" --qps "$qps" --burst "$burst")
  args+=(--max-unavailable $((pods / 5 > 0 ? pods / 5 : 1)))
  kc create namespace "$ns" >/dev/null
  local o0 o1 o2 ts tu="0" scale inplace="{}"
  o0=$(audit_size)
  ts=$(KUBECONFIG=$kubeconfig "$floor_bin" scale "${args[@]}" | jq -r .seconds)
  log "floor: $pods Ready in $ts s"
  quiesce "bench-floor/"
  o1=$(audit_size)
  if [ "$inplace_phase" = 1 ]; then
    tu=$(KUBECONFIG=$kubeconfig "$floor_bin" inplace "${args[@]}" | jq -r .seconds)
    log "floor: $pods updated in place in $tu s"
    quiesce "bench-floor/"
  fi
  o2=$(audit_size)
  scale=$(summarize "$o0" "$o1" "bench-floor/")
  [ "$inplace_phase" = 1 ] && inplace=$(summarize "$o1" "$o2" "bench-floor/")
  jq -n --argjson pods "$pods" --argjson qps "$qps" --argjson scale "$scale" \
    --argjson inplace "$inplace" --arg ts "$ts" --arg tu "$tu" \
    --argjson with_inplace "$inplace_phase" "$phase_jq"'
    {implementation: "floor", binary: "bench-floor (API minimum)", pods: $pods,
     scale: phase($scale; $ts; ""),
     inplace: (if $with_inplace == 1 then phase($inplace; $tu; "") else null end)}' \
    >"$out/compare-floor.json"
  log "floor: deleting its Pods"
  kc delete namespace "$ns" --timeout=1800s >/dev/null
}

# --- the run ----------------------------------------------------------------------------

rm -f "$out"/compare-ours.json "$out"/compare-upstream.json "$out"/compare-floor.json
case $only in "" | ours) run_ours ;; esac
case $only in "" | upstream) run_upstream ;; esac
case $only in "" | floor) run_floor ;; esac

sides=()
[ -f "$out/compare-ours.json" ] && sides+=("$out/compare-ours.json")
[ -f "$out/compare-upstream.json" ] && sides+=("$out/compare-upstream.json")
[ -f "$out/compare-floor.json" ] && sides+=("$out/compare-floor.json")
jq -s --argjson pods "$pods" --arg cpus "$(nproc)" \
  --argjson qps "$qps" --argjson burst "$burst" --argjson workers "$workers" \
  '{pods: $pods, qps: $qps, burst: $burst, workers: $workers, machine_cpus: ($cpus | tonumber),
    update_strategy: "InPlaceIfPossible, maxUnavailable 20%",
    results: (. as $all | ($all | map(select(.implementation == "floor"))[0]) as $floor | map(. as $side
      | if $floor == null or $side.implementation == "floor" then $side
        else $side
          | .scale.floor_ratio = (.scale.seconds / $floor.scale.seconds * 100 | round / 100)
          | if .inplace and $floor.inplace
            then .inplace.floor_ratio = (.inplace.seconds / $floor.inplace.seconds * 100 | round / 100)
            else . end
        end))}' \
  "${sides[@]}" >"$out/compare.json"
rm -f "${sides[@]}"

# The table: one column per implementation.
jq -r '
  def verbs: to_entries | map("\(.key) \(.value)") | join(", ");
  def rows($p; $q): [
    ["  wall time (s)", (.[] | .[$p].seconds | tostring)],
    ["  Pod writes / Pod", (.[] | .[$p].pod_writes_per_pod | tostring)],
    ["    by verb", (.[] | .[$p].pod_writes_per_pod_by_verb | verbs)],
    ["  Pod GETs / Pod", (.[] | .[$p].pod_gets_per_pod | tostring)],
    ["  409 conflicts / Pod", (.[] | .[$p].pod_conflicts_per_pod | tostring)],
    ["  all requests / Pod", (.[] | .[$p].requests_per_pod | tostring)],
    ["  requests / \($q) QPS (s)", (.[] | .[$p].qps_floor_seconds | tostring)],
    ["  wall time / floor", (.[] | .[$p].floor_ratio // "" | tostring)],
    ["  CPU (s)", (.[] | .[$p].cpu_seconds // "" | tostring)]];
  .pods as $n | .qps as $q | .results as $r
  | (["", ($r[] | .binary)]),
    (["scale 0 -> \($n) Ready, \($q) QPS", ($r[] | "")]),
    ($r | rows("scale"; $q)[]),
    (if $r[0].inplace then (["in-place rollout of \($n)", ($r[] | "")]), ($r | rows("inplace"; $q)[])
     else (["in-place rollout", ($r[] | "not run (BENCH_INPLACE=0)")]) end),
    (["restart with \($n) Pods", ($r[] | "")]),
    (["  ready (s)", ($r[] | .restart.ready_seconds // "" | tostring)]),
    (["  ready and idle (s)", ($r[] | .restart.idle_seconds // "" | tostring)]),
    (["  requests, Pod writes", ($r[] | if .restart then "\(.restart.requests), \(.restart.pod_writes)" else "" end)]),
    (["  RSS (MiB)", ($r[] | .restart.rss_mib // "" | tostring)]),
    (["RSS idle, no Pods (MiB)", ($r[] | .idle_rss_mib // "" | tostring)]),
    (["bytes per cached Pod", ($r[] | .bytes_per_cached_pod // "" | tostring)]),
    (["peak RSS (MiB)", ($r[] | .peak_rss_mib // "" | tostring)]),
    (["RSS at the end (MiB)", ($r[] | .rss_at_end_mib // "" | tostring)])
  | map(. + "                                                  ")
  | (.[0][0:34]) + (.[1:] | map(.[0:44]) | join(""))' "$out/compare.json" | sed 's/ *$//'
log "written to target/bench/compare.json (audit log: $audit)"
