#!/usr/bin/env bash
# Runs every controller binary of the workspace against the local cluster.
#
#   controllers.sh up      build, install CRDs, start each controller in the background,
#                          wait until each reports ready on /readyz; with the real node
#                          (`make up-real`) also the node agent daemon-agent for real-0
#   controllers.sh down    stop them
#   controllers.sh list    print "<binary> <admin-port> <webhook-port>" per controller
#   controllers.sh crds [DIR]  only the CRD step of `up`: apply deploy/crds/ (or DIR)
#
# Logs: .local/logs/<binary>.log; pids: .local/run/<binary>.pid. Admin ports start at
# 18080, webhook ports at 19443, one each per controller in the order of controllers.txt,
# also when KRUISE_CONTROLLERS runs a few of them (the apiserver's authorization config
# names imagepulljob-ctl's webhook port; KRUISE_CTL_ADMIN_PORT / KRUISE_CTL_WEBHOOK_PORT
# move the bases, for a second cluster).
#
# KRUISE_FEATURE_GATES (OpenKruise's gate names, `Name=true,Other=false`) is handed to
# every controller: `make up KRUISE_FEATURE_GATES=CloneSetShortHash=true`. `make
# conformance` starts them with upstream's e2e gates this way (tests/conformance/run.sh).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
state=${KRUISE_LOCAL_DIR:-$root/.local}
logs=$state/logs
run=$state/run
kubeconfig=$state/kubeconfig
profile_dir=${CARGO_TARGET_DIR:-$root/target}/debug

# Every controller binary the workspace builds. A new controller is added here.
read -r -a ALL_CONTROLLERS <<<"$(grep -v '^#' "$here/controllers.txt" | tr '\n' ' ')"
read -r -a CONTROLLERS <<<"${KRUISE_CONTROLLERS:-${ALL_CONTROLLERS[*]}}"

log() { echo "controllers: $*" >&2; }

list() {
  local c i j extra=${#ALL_CONTROLLERS[@]}
  for c in "${CONTROLLERS[@]}"; do
    i=
    for j in "${!ALL_CONTROLLERS[@]}"; do [ "${ALL_CONTROLLERS[$j]}" = "$c" ] && i=$j; done
    # One not in controllers.txt: after those.
    [ -n "$i" ] || { i=$extra; extra=$((extra + 1)); }
    echo "$c $((${KRUISE_CTL_ADMIN_PORT:-18080} + i)) $((${KRUISE_CTL_WEBHOOK_PORT:-19443} + i))"
  done
}

# The node agent of the real node (`make up-real`): the one DaemonSet Pod a deployment
# would run there, here a process at the node's containerd socket (no Lease, no webhook).
agent_admin=$((${KRUISE_CTL_ADMIN_PORT:-18080} + 50))

start_agent() {
  [ -f "$run/real-node" ] || return 0
  local socket
  socket=$("$here/node.sh" env | sed -n 's/^KRUISE_CONTAINERD_SOCKET=//p')
  (cd "$root" && cargo build --quiet --bin daemon-agent)
  KUBECONFIG=$kubeconfig \
    NODE_NAME=real-0 \
    KRUISE_CRI_SOCKET=$socket \
    KRUISE_LEADER_ELECT=false \
    KRUISE_ADMIN_ADDR=127.0.0.1:$agent_admin \
    KRUISE_NAMESPACE=kruise-daemon-config \
    RUST_LOG=${RUST_LOG:-info} \
    setsid "$profile_dir/daemon-agent" >"$logs/daemon-agent.log" 2>&1 </dev/null &
  echo $! >"$run/daemon-agent.pid"
  local deadline=$((SECONDS + 60))
  until curl -sf "http://127.0.0.1:$agent_admin/readyz" >/dev/null 2>&1; do
    if ! kill -0 "$(cat "$run/daemon-agent.pid")" 2>/dev/null || [ $SECONDS -ge $deadline ]; then
      log "daemon-agent (real-0) not ready; last log lines:"
      tail -n 20 "$logs/daemon-agent.log" >&2
      return 1
    fi
    sleep 0.5
  done
  log "daemon-agent ready for real-0 (admin http://127.0.0.1:$agent_admin, log $logs/daemon-agent.log)"
}

stop_agent() {
  local f=$run/daemon-agent.pid
  [ -f "$f" ] || return 0
  kill "$(cat "$f")" 2>/dev/null || true
  rm -f "$f"
}

stop() {
  stop_agent
  local stopped=()
  while read -r c _ webhook; do
    local f=$run/$c.pid
    [ -f "$f" ] || continue
    local pid
    pid=$(cat "$f")
    kill "$pid" 2>/dev/null || true
    for _ in $(seq 1 40); do kill -0 "$pid" 2>/dev/null || break; sleep 0.25; done
    kill -9 "$pid" 2>/dev/null || true
    rm -f "$f"
    stopped+=("https://127.0.0.1:$webhook/")
  done < <(list)
  [ ${#stopped[@]} -gt 0 ] && forget_endpoints "${stopped[@]}"
  return 0
}

# A cluster-wide controller leaves its webhook configurations and its CRD's conversion
# for the next replica; here no replica follows, and a webhook pointing at a stopped
# process would refuse every CloneSet (or Pod) of the cluster. Removes what points at
# the given URL prefixes.
forget_endpoints() {
  local bin kubectl
  bin=$("$here/cluster.sh" bin 2>/dev/null) || return 0
  kubectl="$bin/kubectl --kubeconfig $kubeconfig --request-timeout=10s"
  $kubectl get --raw /readyz >/dev/null 2>&1 || return 0
  local kind name url prefix
  for kind in validatingwebhookconfigurations mutatingwebhookconfigurations crd; do
    local path='{.webhooks[0].clientConfig.url}'
    [ "$kind" = crd ] && path='{.spec.conversion.webhook.clientConfig.url}'
    while read -r name url; do
      [ -n "$url" ] || continue
      for prefix in "$@"; do
        [[ $url == "$prefix"* ]] || continue
        if [ "$kind" = crd ]; then
          $kubectl patch crd "$name" --type=merge \
            -p '{"spec":{"conversion":{"strategy":"None","webhook":null}}}' >/dev/null || true
          # ... and back to the shipped conversion (the controller's Service: v1beta1 reads
          # fail until a controller registers again, rather than being relabelled).
          [ -f "$root/deploy/crds/$name.yaml" ] &&
            $kubectl apply --server-side --force-conflicts -f "$root/deploy/crds/$name.yaml" >/dev/null || true
        else
          $kubectl delete "$kind" "$name" --ignore-not-found >/dev/null || true
        fi
      done
    done < <($kubectl get "$kind" -o jsonpath="{range .items[*]}{.metadata.name}{\" \"}$path{\"\\n\"}{end}" 2>/dev/null)
  done
}

# Applies deploy/crds/, also over an OpenKruise install (kruise-manager v1.9.0): its CRDs
# point their conversion at kruise-manager's Service, which server-side apply cannot
# remove (another field manager owns it), and a controller of ours that was not stopped
# cleanly leaves its URL there, which cannot be merged with the Service our CRDs name.
# Such a conversion is reset to None first (the apply sets ours again at once; the
# controllers started here register their own), and Advanced StatefulSet's CRD states
# `strategy: None`, which the apiserver refuses next to a leftover webhook. On a failure,
# says which CRD and why, and fails.
install_crds() {
  local kubectl=$1 dir=${2:-$root/deploy/crds} name service url f out failed=()
  while read -r name service url; do
    [ -f "$dir/$name.yaml" ] || continue
    [ "$service" != "/" ] || [ -n "$url" ] || continue
    log "$name: conversion webhook at ${url:-Service $service}: reset before the apply"
    $kubectl patch crd "$name" --type=merge \
      -p '{"spec":{"conversion":{"strategy":"None","webhook":null}}}' >/dev/null
  done < <($kubectl get crd -o jsonpath='{range .items[*]}{.metadata.name}{" "}{.spec.conversion.webhook.clientConfig.service.namespace}{"/"}{.spec.conversion.webhook.clientConfig.service.name}{" "}{.spec.conversion.webhook.clientConfig.url}{"\n"}{end}')
  if ! $kubectl apply --server-side --force-conflicts -f "$dir/" >/dev/null 2>&1; then
    # Once more file by file, to name each CRD that does not apply.
    for f in "$dir"/*.yaml; do
      if ! out=$($kubectl apply --server-side --force-conflicts -f "$f" 2>&1); then
        log "CRD $(basename "$f" .yaml) does not apply: $out"
        failed+=("$(basename "$f" .yaml)")
      fi
    done
    if [ ${#failed[@]} -gt 0 ]; then
      log "${#failed[@]} CRD(s) not installed: ${failed[*]}; no controller started"
      return 1
    fi
  fi
  if ! out=$($kubectl wait --for condition=established --timeout=60s -f "$dir/" 2>&1); then
    log "CRDs not Established after 60s: $out"
    return 1
  fi
}

up() {
  local bin
  bin=$("$here/cluster.sh" bin)
  local kubectl="$bin/kubectl --kubeconfig $kubeconfig"
  mkdir -p "$logs" "$run"
  if [ ${#CONTROLLERS[@]} -gt 0 ]; then
    log "building ${CONTROLLERS[*]}"
    (cd "$root" && cargo build --quiet $(printf -- '--bin %s ' "${CONTROLLERS[@]}"))
  fi
  log "installing CRDs"
  install_crds "$kubectl"
  # kruise-system, and the config namespace (kruise-daemon-config: the node agent's, where
  # imagepulljob-ctl copies the jobs' pull secrets), as a deployment has them.
  for ns in kruise-system kruise-daemon-config; do
    $kubectl create namespace "$ns" --dry-run=client -o yaml | $kubectl apply -f - >/dev/null
  done
  stop
  # ResourceDistributionGate is off upstream (its webhook then refuses every RD); the
  # local cluster turns it on so `make up` shows the feature. Listed first: the caller's
  # KRUISE_FEATURE_GATES come after and win (ResourceDistributionGate=false turns it off).
  local gates=ResourceDistributionGate=true${KRUISE_FEATURE_GATES:+,$KRUISE_FEATURE_GATES}
  # Admission requests only from the apiserver: it presents the client certificate
  # cluster.sh issued (webhook-client-ca.crt) to every webhook.
  local client_ca=$state/pki/webhook-client-ca.crt
  [ -f "$client_ca" ] || client_ca=
  # A process left from an earlier run (killed without `down`) still holding a port would
  # answer the readiness check below for the new one, which exits ("Address already in
  # use"), and would not re-register its conversion webhooks after install_crds reset them.
  while read -r c admin webhook; do
    if curl -s -o /dev/null "http://127.0.0.1:$admin/healthz" 2>/dev/null; then
      log "port $admin ($c) is held by another process: $(ss -ltnp "sport = :$admin" 2>/dev/null | tail -n +2)"
      return 1
    fi
  done < <(list)
  while read -r c admin webhook; do
    # A serving certificate cluster.sh issued from the cluster CA (imagepulljob-ctl's: the
    # apiserver's authorization webhook trusts that CA); else a generated one.
    local cert_dir=$state/pki/webhook-$c
    [ -f "$cert_dir/tls.crt" ] || cert_dir=
    KUBECONFIG=$kubeconfig \
      KRUISE_WEBHOOK_CERT_DIR=$cert_dir \
      KRUISE_WEBHOOK_CLIENT_CA=$client_ca \
      KRUISE_ADMIN_ADDR=127.0.0.1:$admin \
      KRUISE_WEBHOOK_ADDR=127.0.0.1:$webhook \
      KRUISE_WEBHOOK_URL=https://127.0.0.1:$webhook \
      KRUISE_NAMESPACE=kruise-system \
      KRUISE_FEATURE_GATES=$gates \
      RUST_LOG=${RUST_LOG:-info} \
      setsid "$profile_dir/$c" >"$logs/$c.log" 2>&1 </dev/null &
    echo $! >"$run/$c.pid"
  done < <(list)
  while read -r c admin _; do
    local deadline=$((SECONDS + 60))
    until curl -sf "http://127.0.0.1:$admin/readyz" >/dev/null 2>&1; do
      if ! kill -0 "$(cat "$run/$c.pid")" 2>/dev/null; then
        log "$c exited; last log lines:"
        tail -n 20 "$logs/$c.log" >&2
        return 1
      fi
      if [ $SECONDS -ge $deadline ]; then
        log "$c not ready after 60s: $(curl -s "http://127.0.0.1:$admin/readyz")"
        return 1
      fi
      sleep 0.5
    done
    log "$c ready (admin http://127.0.0.1:$admin, log $logs/$c.log)"
  done < <(list)
  start_agent
}

case "${1:-}" in
  up) up ;;
  crds) install_crds "$("$here/cluster.sh" bin)/kubectl --kubeconfig $kubeconfig" "${2:-}" ;;
  down) stop ;;
  list) list ;;
  *)
    echo "usage: $0 up|down|list|crds [DIR]" >&2
    exit 2
    ;;
esac
