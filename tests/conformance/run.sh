#!/usr/bin/env bash
# Runs OpenKruise v1.9.0's own Ginkgo e2e suite (github.com/openkruise/kruise/test/e2e,
# built by build.sh, never edited) against the local cluster with our controllers:
#
#   tests/conformance/run.sh [SUITE...|all] SUITE: cloneset sidecarset sidecarresourcespolicy
#                                           statefulset volumeexpansion daemonset broadcastjob
#                                           advancedcronjob podunavailablebudget uniteddeployment
#                                           workloadspread resourcedistribution persistentpodstate
#                                           deletionprotection inplacevpa containerpriority
#                                           ephemeraljob (upstream's Describe labels) and, not in `all`:
#                                           containerrecreaterequest imagepulljob imagelistpulljob
#                                           containermeta podprobemarker sidecarterminator
#                                           (they need kruise-daemon: below)
#   FOCUS='VolumeClaimTemplate' tests/conformance/run.sh cloneset      only the specs whose full
#                                                                       text matches (--ginkgo.focus)
#
# - the cluster is started if needed (tests/cluster/cluster.sh up, idempotent), and every
#   controller of tests/cluster/controllers.txt is (re)started with upstream's e2e feature
#   gates: upstream CI runs kruise-manager with AllAlpha=true,AllBeta=true (minus
#   EnableExternalCerts and TemplateNoDefaults, config/manager/manager.yaml); our binaries
#   take explicit names, so every upstream alpha/beta gate that ours know is turned on
#   (KRUISE_CONFORMANCE_GATES overrides the list). Afterwards the controllers are stopped,
#   or restarted with the caller's KRUISE_FEATURE_GATES when they were running before.
# - one `--ginkgo.label-filter` run per suite (the Describe labels: CloneSet, SidecarSet,
#   StatefulSet, which select both API versions' specs), one spec at a time, fixed seed;
#   specs listed in skips.txt are skipped (`--ginkgo.skip`, anchored on the full text
#   "Kruise e2e suite <texts>"), each with its written reason; so are the specs of
#   k8s-1.32.txt, except on Kubernetes 1.32 with in-place Pod resize on
#   (`make conformance-1.32`), where they run on real-0 as those of real-node.txt.
# - the specs of real-node.txt need a real kubelet and container runtime (exec, probes,
#   PostStart hooks, crashing containers, kruise-daemon): they are skipped on the kwok
#   nodes and, when the cluster has the real node real-0 (`make up-real`), run in a
#   second pass of the suite on real-0 alone (every kwok node tainted, real-0 untainted,
#   the stand-in images of stand-in-images.sh in its registry); without real-0 the
#   summary lists them as skipped with what they need. The pull suites (imagepulljob,
#   imagelistpulljob) run their entries one at a time, each on a cold image cache behind a
#   slow registry (cold-pull.sh). An entry belongs to the suite whose
#   Ginkgo label its text starts with (CloneSet, StatefulSet, ...).
# - the suite reads only $KUBECONFIG (its --kubeconfig flag is ignored) and looks for the
#   kruise-configuration ConfigMap and ControllerRevisions in $POD_NAMESPACE (kruise-system).
#
# Output under target/conformance/: <suite>.log (Ginkgo's console output), <suite>.json
# (Ginkgo's report: every spec's timeline; <suite>.real-node.json for the pass on real-0),
# <suite>.junit.xml (the suite's specs only, skipped ones with their reason) and summary.md: the table (suite, specs, run, passed,
# failed, skipped) with skip reasons and every failure (spec, assertion file:line, message).
# Exit status 1 when a spec failed. Not part of `make test`: statefulset takes about 5
# minutes, cloneset 12, sidecarset 15 (on 2 cores).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
state=${KRUISE_LOCAL_DIR:-$root/.local}
kubeconfig=$state/kubeconfig
out=${CONFORMANCE_OUT:-$root/target/conformance}
suite=${1:-${SUITE:-all}}

log() { echo "conformance: $*" >&2; }

label_of() {
  case $1 in
    cloneset) echo CloneSet ;;
    sidecarset) echo SidecarSet ;;
    statefulset) echo StatefulSet ;;
    daemonset) echo DaemonSet ;;
    broadcastjob) echo BroadcastJob ;;
    advancedcronjob) echo AdvancedCronJob ;;
    podunavailablebudget) echo PodUnavailableBudget ;;
    uniteddeployment) echo UnitedDeployment ;;
    workloadspread) echo WorkloadSpread ;;
    resourcedistribution) echo ResourceDistribution ;;
    persistentpodstate) echo PersistentPodState ;;
    deletionprotection) echo DeletionProtection ;;
    sidecarresourcespolicy) echo SidecarResourcesPolicy ;;
    volumeexpansion) echo VolumeExpansion ;;
    containerrecreaterequest) echo ContainerRecreateRequest ;;
    imagepulljob) echo PullImage ;;
    imagelistpulljob) echo PullImages ;;
    inplacevpa) echo InplaceVPA ;;
    containermeta) echo ContainerMeta ;;
    containerpriority) echo ContainerPriority ;;
    podprobemarker) echo PodProbeMarker ;;
    ephemeraljob) echo EphemeralJob ;;
    sidecarterminator) echo SidecarTerminator ;;
    *) return 1 ;;
  esac
}

# Every suite one of our controllers covers, by upstream's Describe label.
all_suites=(cloneset sidecarset sidecarresourcespolicy statefulset volumeexpansion daemonset
  broadcastjob advancedcronjob podunavailablebudget uniteddeployment workloadspread
  resourcedistribution persistentpodstate deletionprotection inplacevpa containerpriority
  ephemeraljob)

# Suites that need kruise-daemon on every node their specs use, i.e. our node agent
# (daemon-agent) on the real node real-0 (`make up-real`, KRUISE_REAL_NODE=1): the
# ContainerRecreateRequest specs recreate containers through the CRI of the Pod's node
# (crr-ctl refuses a request for a Pod on a kwok node: no containerID), the
# ImagePullJob/ImageListPullJob specs wait for every node's NodeImage to report the
# pull, the PodProbeMarker specs wait for probes the node agent runs (exec in the
# containers). They are not part of `all`; run by name they say what is missing (docs/conformance.md:
# what blocks each spec).
daemon_suites=(containerrecreaterequest imagepulljob imagelistpulljob containermeta podprobemarker
  sidecarterminator)

# Several suites may be named at once (one controller start for all of them).
suites=()
for s in ${@:-$suite}; do
  case $s in
    all) suites+=("${all_suites[@]}") ;;
    *)
      label_of "$s" >/dev/null || { echo "usage: $0 [$(IFS='|'; echo "${all_suites[*]} ${daemon_suites[*]}" | tr ' ' '|')|all]..." >&2; exit 2; }
      if [[ " ${daemon_suites[*]} " == *" $s "* ]] && [ ! -f "$state/run/real-node" ]; then
        log "suite $s needs kruise-daemon, i.e. the real node real-0 and its agent (KRUISE_REAL_NODE=1 cluster); this cluster has none: its specs will fail"
      fi
      suites+=("$s")
      ;;
  esac
done

# Every alpha and beta gate of upstream v1.9.0 (pkg/features/kruise_features.go), i.e. what
# AllAlpha=true,AllBeta=true turns on; EnableExternalCerts and TemplateNoDefaults stay off
# as in upstream's config/manager/manager.yaml.
upstream_gates=(
  PodWebhook KruiseDaemon DaemonWatchingPod CloneSetShortHash KruisePodReadinessGate
  PreDownloadImageForInPlaceUpdate CloneSetPartitionRollback ResourcesDeletionProtection
  WorkloadSpread PodUnavailableBudgetDeleteGate PodUnavailableBudgetUpdateGate
  InPlaceUpdateEnvFromMetadata StatefulSetAutoDeletePVC SidecarSetPatchPodMetadataDefaultsAllowed
  SidecarTerminator PodProbeMarkerGate PreDownloadImageForDaemonSetUpdate
  CloneSetEventHandlerOptimization PreparingUpdateAsUpdate ImagePullJobGate ResourceDistributionGate
  DeletionProtectionForCRDCascadingGate EnhancedLivenessProbe RecreatePodWhenChangeVCTInCloneSetGate
  StatefulSetStartOrdinal PodIndexLabel StatefulSetAutoResizePVCGate ForceDeleteTimeoutExpectationGate
  InPlaceWorkloadVerticalScaling EnablePodProbeMarkerOnServerless EnableSortSidecarContainerByName
  InPlacePodVerticalScaling DefaultHostNetworkHostPortsInPodTemplates DaemonSetPruneIneligibleNodes
)

conformance_gates() {
  if [ -n "${KRUISE_CONFORMANCE_GATES+x}" ]; then
    echo "$KRUISE_CONFORMANCE_GATES"
    return
  fi
  # The gates our binaries know (an unknown name stops them at start).
  local known gates=() missing=()
  known=$(grep -oE '= "[A-Za-z]+" => (true|false)' "$root/crates/kruise-runtime/src/gates.rs" | cut -d'"' -f2)
  for g in "${upstream_gates[@]}"; do
    if grep -qx "$g" <<<"$known"; then gates+=("$g=true"); else missing+=("$g"); fi
  done
  [ ${#missing[@]} -eq 0 ] || log "upstream gates our controllers do not know (left out): ${missing[*]}"
  (IFS=,; echo "${gates[*]}")
}

bin=$("$here/build.sh")
report=$(dirname "$bin")/conformance-report
"$root/tests/cluster/cluster.sh" up
PATH=$("$root/tests/cluster/cluster.sh" bin):$PATH
export PATH

controllers_running() {
  local f
  for f in "$state"/run/*-ctl.pid; do
    [ -f "$f" ] && kill -0 "$(cat "$f")" 2>/dev/null && return 0
  done
  return 1
}

was_running=false
controllers_running && was_running=true
caller_gates=${KRUISE_FEATURE_GATES:-}
restore() {
  if $was_running; then
    log "restarting the controllers with the caller's gates (KRUISE_FEATURE_GATES=$caller_gates)"
    KRUISE_FEATURE_GATES=$caller_gates "$root/tests/cluster/controllers.sh" up || true
  else
    log "stopping the controllers"
    "$root/tests/cluster/controllers.sh" down || true
  fi
}
trap restore EXIT

gates=$(conformance_gates)
log "starting the controllers with KRUISE_FEATURE_GATES=$gates"
KRUISE_FEATURE_GATES=$gates "$root/tests/cluster/controllers.sh" up

# What upstream's e2e CI sets up before some suites, besides installing kruise:
# - workloadspread: the TFJob CRD (kubeflow's, installed by tools/hack/run-kruise-e2e-test.sh;
#   ours in manifests/ only serves the kind) and the custom workload allowlist of
#   test/kruise-e2e-config.yaml (TFJob, Advanced DaemonSet) in kruise-configuration; and
#   kind's shape of 3 schedulable workers: "job-like custom workload" expects an Advanced
#   DaemonSet of 3 ready Pods, so the last kwok node is tainted as kind's control plane
#   (node-role.kubernetes.io/control-plane:NoSchedule) for the suite and untainted after.
kc() { kubectl --kubeconfig "$kubeconfig" "$@"; }
control_plane_taint=node-role.kubernetes.io/control-plane:NoSchedule
tainted_node=
suite_setup() {
  case $1 in
    workloadspread)
      kc apply -f "$here/manifests/tfjobs-crd.yaml" >/dev/null
      kc wait --for condition=established --timeout=60s crd/tfjobs.kubeflow.org >/dev/null
      kc create namespace "${POD_NAMESPACE:-kruise-system}" --dry-run=client -o yaml | kc apply -f - >/dev/null
      kc -n "${POD_NAMESPACE:-kruise-system}" create configmap kruise-configuration >/dev/null 2>&1 || true
      kc -n "${POD_NAMESPACE:-kruise-system}" patch configmap kruise-configuration --type merge \
        -p "$(python3 -c 'import json,sys; print(json.dumps({"data": {"WorkloadSpread_Watch_Custom_Workload_WhiteList": open(sys.argv[1]).read()}}))' \
          "$here/manifests/workloadspread-allowlist.json")" >/dev/null
      tainted_node=$(kc get nodes -l type=kwok -o name | sort | tail -n 1); tainted_node=${tainted_node#node/}
      log "tainting $tainted_node as kind's control plane for the suite (3 schedulable workers)"
      kc taint nodes "$tainted_node" "$control_plane_taint" --overwrite >/dev/null
      ;;
    daemonset) kind_workers_setup ;;
    containerrecreaterequest | imagepulljob | imagelistpulljob) daemon_setup "$1" ;;
    # Pods on real-0 alone, as for ContainerRecreateRequest: the agent acts there only.
    containermeta | podprobemarker | sidecarterminator) daemon_setup containerrecreaterequest ;;
  esac
}
# - daemonset: kind's worker nodes and a stoppable kubelet. "should ignore not ready nodes
#   during rolling update when annotation is set" takes the Nodes whose name contains
#   "-worker", stops the last two with `docker stop` and starts them again with `docker
#   start`, and waits for a Ready kruise-controller-manager Pod in kruise-system. For the
#   suite, two kwok Nodes named as kind names its workers (kind-nodes/nodes.yaml), a
#   `docker` on the suite's PATH that stops and starts such a Node's kubelet as kwok plays
#   it (kind-nodes/docker: it takes the Node's Lease from kwok and gives it back), and a
#   stand-in manager Deployment (kind-nodes/kruise-manager.yaml); all removed after.
kind_workers=false
suite_path=
kind_workers_setup() {
  log "suite daemonset: adding kind's worker stand-ins (kwok-worker, kwok-worker2), a docker stand-in on the suite's PATH, a stand-in manager Pod"
  kind_workers=true
  suite_path=$here/kind-nodes
  kc apply -f "$here/kind-nodes/nodes.yaml" >/dev/null
  local deadline=$((SECONDS + 60))
  until [ "$(kc get nodes -l e2e.kruise.io/kind-worker=true -o jsonpath='{range .items[*]}{.status.conditions[?(@.type=="Ready")].status}{"\n"}{end}' | grep -c True)" = 2 ]; do
    [ $SECONDS -lt $deadline ] || { log "the kind worker stand-ins are not Ready after 60s"; break; }
    sleep 1
  done
  kc taint nodes -l e2e.kruise.io/kind-worker=true node.kubernetes.io/not-ready:NoSchedule- >/dev/null 2>&1 || true
  kc create namespace kruise-system --dry-run=client -o yaml | kc apply -f - >/dev/null
  kc apply -f "$here/kind-nodes/kruise-manager.yaml" >/dev/null
  kc -n kruise-system rollout status deployment/kruise-controller-manager --timeout=60s >/dev/null ||
    log "the stand-in manager Pod is not Ready after 60s"
}
kind_workers_teardown() {
  kc -n kruise-system delete deployment kruise-controller-manager --ignore-not-found --wait=false >/dev/null 2>&1 || true
  kc delete nodes -l e2e.kruise.io/kind-worker=true --ignore-not-found >/dev/null 2>&1 || true
  kind_workers=false
  suite_path=
}
# - containerrecreaterequest, imagepulljob, imagelistpulljob (kruise-daemon's suites): only
#   real-0 has a node agent, so the specs must see real-0 only. The stand-ins for the
#   images they use are pushed to real-0's registry and pulls of registry.k8s.io go there
#   (stand-in-images.sh). ContainerRecreateRequest: its CloneSets' Pods must land on real-0,
#   so real-0 loses its node.kruise.io/real taint for the suite and every kwok node gets
#   $no_agent_taint instead. The pull suites count the cluster's Nodes (Desired and
#   Succeeded = number of Nodes, every Node with its NodeImage), so the kwok Nodes are
#   deleted for the suite (imagepulljob-ctl deletes their NodeImages) and created again
#   after, as they were.
real_node=real-0
real_taint=node.kruise.io/real=true:NoSchedule
no_agent_taint=node.kruise.io/no-daemon-agent=true:NoSchedule
untainted_real=false
saved_kwok_nodes=
no_agent_nodes=()
pods_only_on_real_node() { # what for
  mapfile -t no_agent_nodes < <(kc get nodes -l type=kwok -o name | sed 's|^node/||')
  log "$1: Pods only on $real_node (untainted; kwok nodes tainted $no_agent_taint)"
  [ ${#no_agent_nodes[@]} -eq 0 ] || kc taint nodes "${no_agent_nodes[@]}" "$no_agent_taint" --overwrite >/dev/null
  kc taint nodes "$real_node" "${real_taint%%=*}:NoSchedule-" >/dev/null 2>&1 || true
  untainted_real=true
}
daemon_setup() {
  if [ ! -f "$state/run/real-node" ]; then
    log "suite $1: no real node here; its specs will fail (KRUISE_REAL_NODE=1 tests/cluster/cluster.sh down/up)"
    return 0
  fi
  "$here/stand-in-images.sh"
  case $1 in
    containerrecreaterequest) pods_only_on_real_node "suite $1" ;;
    imagepulljob | imagelistpulljob)
      saved_kwok_nodes=$(mktemp)
      kc get nodes -l type=kwok -o json | python3 -c '
import json, sys
items = []
for n in json.load(sys.stdin)["items"]:
    meta = {k: n["metadata"][k] for k in ("name", "labels", "annotations") if k in n["metadata"]}
    status = {k: n["status"][k] for k in ("allocatable", "capacity") if k in n.get("status", {})}
    spec = {k: v for k, v in n.get("spec", {}).items() if k != "taints"}
    items.append({"apiVersion": "v1", "kind": "Node", "metadata": meta, "spec": spec, "status": status})
json.dump({"apiVersion": "v1", "kind": "List", "items": items}, sys.stdout)' >"$saved_kwok_nodes"
      log "suite $1: deleting the kwok Nodes for the suite ($real_node alone; they come back after)"
      kc delete nodes -l type=kwok --wait=true >/dev/null
      local deadline=$((SECONDS + 60))
      until [ "$(kc get nodeimages -o name | grep -cv '/fake-nodeimage$')" = "$(kc get nodes -o name | wc -l)" ]; do
        [ $SECONDS -lt $deadline ] || { log "NodeImages of the deleted Nodes still there after 60s"; break; }
        sleep 1
      done
      ;;
  esac
}
cold_pull=false
suite_teardown() {
  if $cold_pull; then
    "$here/cold-pull.sh" off || log "could not give real-0 its fast registry mirrors back (cold-pull.sh off)"
    cold_pull=false
  fi
  if $kind_workers; then
    kind_workers_teardown
  fi
  if [ -n "$tainted_node" ]; then
    kc taint nodes "$tainted_node" "$control_plane_taint-" >/dev/null 2>&1 || true
    tainted_node=
  fi
  if [ ${#no_agent_nodes[@]} -gt 0 ]; then
    kc taint nodes "${no_agent_nodes[@]}" "${no_agent_taint%%=*}:NoSchedule-" >/dev/null 2>&1 || true
    no_agent_nodes=()
  fi
  if $untainted_real; then
    kc taint nodes "$real_node" "$real_taint" --overwrite >/dev/null 2>&1 || true
    untainted_real=false
  fi
  if [ -n "$saved_kwok_nodes" ]; then
    log "creating the kwok Nodes again"
    kc apply -f "$saved_kwok_nodes" >/dev/null || log "could not create the kwok Nodes again: $saved_kwok_nodes"
    sleep 2
    kc taint nodes -l type=kwok node.kubernetes.io/not-ready:NoSchedule- >/dev/null 2>&1 || true
    rm -f "$saved_kwok_nodes"
    saved_kwok_nodes=
  fi
}
trap 'suite_teardown; restore' EXIT

# k8s-1.32.txt: specs that need Kubernetes 1.32's in-place Pod resize (the alpha gate
# InPlacePodVerticalScaling on; `make conformance-1.32`). On such a cluster they join the
# real node's specs (they need its kubelet), anywhere else the skipped ones.
lists=$(mktemp -d)
server_minor=$(kc version -o json | jq -r '.serverVersion.minor' | tr -dc 0-9)
if [ "$server_minor" = 32 ] && kc get --raw /api/v1 | jq -e '.resources[] | select(.name == "pods/resize")' >/dev/null; then
  log "Kubernetes 1.32 with in-place Pod resize: the specs of k8s-1.32.txt run on $real_node"
  cp "$here/skips.txt" "$lists/skips.txt"
  cat "$here/real-node.txt" "$here/k8s-1.32.txt" >"$lists/real-node.txt"
else
  cat "$here/skips.txt" "$here/k8s-1.32.txt" >"$lists/skips.txt"
  cp "$here/real-node.txt" "$lists/real-node.txt"
fi
skips_list=$lists/skips.txt
real_list=$lists/real-node.txt
skip_re=$("$report" regex "$skips_list" "$real_list")
only_skips_re=$("$report" regex "$skips_list")
suite_run() { # json-report focus-regex
  # The binary exits non-zero when a spec fails; the summary below says which.
  (cd "$out" && PATH=${suite_path:+$suite_path:}$PATH KUBECONFIG=$kubeconfig POD_NAMESPACE=${POD_NAMESPACE:-kruise-system} \
    "$bin" -test.timeout=0 \
    --ginkgo.label-filter="$label" \
    ${3:+--ginkgo.skip="$3"} \
    ${2:+--ginkgo.focus="$2"} \
    --ginkgo.seed=1 --ginkgo.no-color --ginkgo.silence-skips --ginkgo.timeout=6h \
    --ginkgo.json-report="$1") 2>&1 || true
}
mkdir -p "$out"
filters=()
for s in "${suites[@]}"; do
  label=$(label_of "$s")
  filters+=("$s=$label")
  rm -f "$out/$s.json" "$out/$s.real-node.json" "$out/$s.junit.xml"
  log "suite $s: --ginkgo.label-filter=$label; console output in $out/$s.log"
  suite_setup "$s"
  start=$SECONDS
  suite_run "$out/$s.json" "${FOCUS:-}" "$skip_re" | tee "$out/$s.log"
  log "suite $s took $((SECONDS - start))s"
  suite_teardown
  # The suite's specs of real-node.txt (and of FOCUS), on real-0 alone.
  real_re=$("$report" regex -match "^Kruise e2e suite $label " ${FOCUS:+-match "$FOCUS"} "$real_list")
  if [ -n "$real_re" ] && [ -f "$state/run/real-node" ]; then
    start=$SECONDS
    case $s in
      imagepulljob | imagelistpulljob)
        # The pull suites' specs of real-node.txt need a pull that lasts: each runs alone,
        # after real-0 forgot the stand-in images, behind a slow registry (cold-pull.sh).
        daemon_setup "$s"
        mapfile -t each_re < <("$report" regex -match "^Kruise e2e suite $label " ${FOCUS:+-match "$FOCUS"} -each "$real_list")
        parts=()
        cold_pull=true
        for i in "${!each_re[@]}"; do
          "$here/cold-pull.sh" on
          suite_run "$out/$s.real-node.$i.json" "${each_re[$i]}" "$only_skips_re" | tee -a "$out/$s.log"
          parts+=("$out/$s.real-node.$i.json")
        done
        jq -s add "${parts[@]}" >"$out/$s.real-node.json"
        rm -f "${parts[@]}"
        ;;
      *)
        "$here/stand-in-images.sh"
        pods_only_on_real_node "suite $s, the specs of real-node.txt"
        suite_run "$out/$s.real-node.json" "$real_re" "$only_skips_re" | tee -a "$out/$s.log"
        ;;
    esac
    log "suite $s on $real_node took $((SECONDS - start))s"
    suite_teardown
  elif [ -n "$real_re" ]; then
    log "suite $s: no real node here, so the specs of real-node.txt are not run (make up-real)"
  fi
done

set +e
"$report" summarize -skips "$skips_list" -real-node "$real_list" -dir "$out" "${filters[@]}" | tee "$out/summary.md"
status=${PIPESTATUS[0]}
log "summary in $out/summary.md, JUnit in $out/<suite>.junit.xml"
rm -rf "$lists"
exit "$status"
