#!/usr/bin/env bash
# The real local control plane, on 127.0.0.1 only:
#   etcd -> kube-apiserver -> kube-controller-manager -> kube-scheduler -> kwok (+ fake nodes)
#
#   cluster.sh up      start (no-op when already up); prints nothing but progress
#   cluster.sh down    stop every process this script started; leaves no process behind
#   cluster.sh status  exit 0 when the cluster answers and every process is alive
#   cluster.sh bin     print the directory holding kubectl & co (building them if needed)
#
# State lives under <repo>/.local: kubeconfig, pki/, logs/, run/ (pid files), etcd/.
# Ports can be moved with KRUISE_APISERVER_PORT, KRUISE_ETCD_PORT (and +1 for peers),
# KRUISE_KCM_PORT, KRUISE_SCHEDULER_PORT; with KRUISE_LOCAL_DIR this runs a second, separate
# cluster (make bench-compare does). KRUISE_APISERVER_ARGS: extra kube-apiserver flags
# (space-separated), e.g. an audit policy. KRUISE_K8S_FEATURE_GATES: Kubernetes feature gates
# (`Name=true,...`) for the apiserver, controller-manager, scheduler and the real node's
# kubelet, e.g. InPlacePodVerticalScaling=true on 1.32, where in-place Pod resize is alpha
# (read at `up`: a running cluster keeps its gates). KRUISE_K8S_VERSION=1.32|1.33|1.34|1.37 (default 1.33,
# k8s-version.sh): the Kubernetes version of the binaries; give it to `bin` and `status` too.
#
# Authorization: Node, RBAC, then the node agent's authorizer (write_authz_config): the
# reads of the agent's ServiceAccount that RBAC does not grant (its NodeImage, its node's
# ContainerRecreateRequests and Pods) go to imagepulljob-ctl's webhook port (as
# controllers.sh numbers it), served with a certificate of this cluster's CA
# (pki/webhook-imagepulljob-ctl/, which controllers.sh hands to that controller).
#
# KRUISE_REAL_NODE=1 (opt-in, `make up-real`) adds the real node real-0 (node.sh: kubelet,
# containerd, a local registry; root and tests/deps.sh --real-node needed) and starts the
# apiserver with what it needs for it: a client certificate at the kubelet, and webhook
# Services resolved to their endpoints (--enable-aggregator-routing: the apiserver calls
# the Pod IP on the node's bridge; there is no kube-proxy). `down` stops the node too.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
state=${KRUISE_LOCAL_DIR:-$root/.local}
pki=$state/pki
logs=$state/logs
run=$state/run
kubeconfig=$state/kubeconfig
apiserver_port=${KRUISE_APISERVER_PORT:-16443}
etcd_port=${KRUISE_ETCD_PORT:-12379}
etcd_peer_port=$((etcd_port + 1))
kcm_port=${KRUISE_KCM_PORT:-20257}
scheduler_port=${KRUISE_SCHEDULER_PORT:-20259}
components=(etcd kube-apiserver kube-controller-manager kube-scheduler kwok)
real_node=${KRUISE_REAL_NODE:-0}

log() { echo "cluster: $*" >&2; }

# shellcheck source=k8s-version.sh
. "$here/k8s-version.sh"
bin_dir() { "$k8s_dir/build.sh"; }

pid_alive() { # name
  local f=$run/$1.pid
  [ -f "$f" ] && kill -0 "$(cat "$f")" 2>/dev/null
}

all_alive() {
  for c in "${components[@]}"; do pid_alive "$c" || return 1; done
}

kc() { "$bin/kubectl" --kubeconfig "$kubeconfig" "$@"; }

wait_for() { # description timeout-seconds command...
  local what=$1 timeout=$2
  shift 2
  local deadline=$((SECONDS + timeout))
  until "$@" >/dev/null 2>&1; do
    if [ $SECONDS -ge $deadline ]; then
      log "timed out after ${timeout}s waiting for $what; logs in $logs"
      return 1
    fi
    sleep 0.5
  done
}

start() { # name command...
  local name=$1
  shift
  # setsid: the process outlives this script and holds none of its file descriptors.
  setsid "$@" >"$logs/$name.log" 2>&1 </dev/null &
  echo $! >"$run/$name.pid"
}

stop() {
  local c
  # The real node first (its Pods, mounts, host changes), whatever KRUISE_REAL_NODE says.
  if [ -d "$state/node" ]; then "$here/node.sh" down || log "stopping the real node failed (see above)"; fi
  rm -f "$run/real-node"
  for ((i = ${#components[@]} - 1; i >= 0; i--)); do
    c=${components[$i]}
    if pid_alive "$c"; then
      kill "$(cat "$run/$c.pid")" 2>/dev/null || true
    fi
  done
  for c in "${components[@]}"; do
    local f=$run/$c.pid
    [ -f "$f" ] || continue
    local pid
    pid=$(cat "$f")
    for _ in $(seq 1 40); do kill -0 "$pid" 2>/dev/null || break; sleep 0.25; done
    kill -9 "$pid" 2>/dev/null || true
    rm -f "$f"
  done
}

make_pki() {
  [ -f "$pki/admin.crt" ] && return 0
  log "creating certificates in $pki"
  mkdir -p "$pki"
  (
    cd "$pki"
    openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.crt -days 3650 \
      -subj "/CN=kruise-rs-local-ca" 2>/dev/null
    cat >apiserver.ext <<EOF
subjectAltName=IP:127.0.0.1,IP:10.0.0.1,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local
extendedKeyUsage=serverAuth
EOF
    openssl req -newkey rsa:2048 -nodes -keyout apiserver.key -out apiserver.csr -subj "/CN=kube-apiserver" 2>/dev/null
    openssl x509 -req -in apiserver.csr -CA ca.crt -CAkey ca.key -CAcreateserial -out apiserver.crt \
      -days 3650 -extfile apiserver.ext 2>/dev/null
    echo "extendedKeyUsage=clientAuth" >client.ext
    openssl req -newkey rsa:2048 -nodes -keyout admin.key -out admin.csr -subj "/O=system:masters/CN=kruise-admin" 2>/dev/null
    openssl x509 -req -in admin.csr -CA ca.crt -CAkey ca.key -CAcreateserial -out admin.crt \
      -days 3650 -extfile client.ext 2>/dev/null
    openssl genrsa -out sa.key 2048 2>/dev/null
    openssl rsa -in sa.key -pubout -out sa.pub 2>/dev/null
    rm -f ./*.csr ./*.ext ./*.srl
  )
}

# The client certificate the apiserver presents to admission webhooks, from a CA of its
# own (webhook-client-ca.crt, which controllers.sh gives the controllers as
# KRUISE_WEBHOOK_CLIENT_CA), and the --admission-control-config-file that makes the
# apiserver present it to every webhook ('*': URL and Service webhooks alike). A controller
# started with KRUISE_WEBHOOK_CLIENT_CA refuses admission requests without it
# (docs/operations.md "Webhooks only the apiserver can call"); others never ask for it.
make_webhook_client_cert() {
  local dir=$state/admission
  mkdir -p "$dir"
  if [ ! -f "$pki/webhook-client.crt" ]; then
    (
      cd "$pki"
      openssl req -x509 -newkey rsa:2048 -nodes -keyout webhook-client-ca.key -out webhook-client-ca.crt \
        -days 3650 -subj "/CN=kruise-rs-local-webhook-client-ca" 2>/dev/null
      echo "extendedKeyUsage=clientAuth" >webhook-client.ext
      openssl req -newkey rsa:2048 -nodes -keyout webhook-client.key -out webhook-client.csr \
        -subj "/CN=kube-apiserver-webhook-client" 2>/dev/null
      openssl x509 -req -in webhook-client.csr -CA webhook-client-ca.crt -CAkey webhook-client-ca.key \
        -CAcreateserial -CAserial webhook-client.srl -out webhook-client.crt -days 3650 \
        -extfile webhook-client.ext 2>/dev/null
      rm -f webhook-client.csr webhook-client.ext webhook-client.srl
    )
  fi
  cat >"$dir/webhook-client.kubeconfig" <<EOF
apiVersion: v1
kind: Config
users:
- name: '*'
  user:
    client-certificate: $pki/webhook-client.crt
    client-key: $pki/webhook-client.key
EOF
  cat >"$dir/admission-config.yaml" <<EOF
apiVersion: apiserver.config.k8s.io/v1
kind: AdmissionConfiguration
plugins:
- name: ValidatingAdmissionWebhook
  configuration:
    apiVersion: apiserver.config.k8s.io/v1
    kind: WebhookAdmissionConfiguration
    kubeConfigFile: $dir/webhook-client.kubeconfig
- name: MutatingAdmissionWebhook
  configuration:
    apiVersion: apiserver.config.k8s.io/v1
    kind: WebhookAdmissionConfiguration
    kubeConfigFile: $dir/webhook-client.kubeconfig
EOF
}

# A serving certificate of the cluster CA for imagepulljob-ctl's webhook server on
# 127.0.0.1 (tls.crt, tls.key, ca.crt: KRUISE_WEBHOOK_CERT_DIR's layout). The apiserver's
# authorization webhook kubeconfig trusts the cluster CA, so it verifies this certificate
# whether the host process or an e2e test serves it; and, being a file, it stays valid
# across the controller's restarts (a generated CA would change with each).
make_webhook_cert() { # binary
  local dir=$pki/webhook-$1
  [ -f "$dir/tls.crt" ] && return 0
  mkdir -p "$dir"
  (
    cd "$dir"
    printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n' >serving.ext
    openssl req -newkey rsa:2048 -nodes -keyout tls.key -out tls.csr -subj "/CN=$1" 2>/dev/null
    openssl x509 -req -in tls.csr -CA "$pki/ca.crt" -CAkey "$pki/ca.key" -CAcreateserial \
      -CAserial ca.srl -out tls.crt -days 3650 -extfile serving.ext 2>/dev/null
    cp "$pki/ca.crt" ca.crt
    rm -f tls.csr serving.ext ca.srl
  )
}

# The node agent's ServiceAccount, whose reads its authorizer judges (imagepulljob-ctl's
# src/authz.rs; docs/imagepulljob.md "Node-scoped reads for the node agent" has this configuration for a real cluster).
agent_user=system:serviceaccount:kruise-daemon-config:daemon-agent

# --authorization-config: Node and RBAC as --authorization-mode Node,RBAC had them, then
# the agent's authorizer, asked only about the agent's reads of its three kinds (the
# matchConditions) and refusing them when it cannot be reached (failurePolicy Deny):
# every other request is decided as before, whether imagepulljob-ctl runs or not.
write_authz_config() {
  local port url dir=$state/authz
  port=$(KRUISE_CONTROLLERS= "$here/controllers.sh" list | awk '$1 == "imagepulljob-ctl" {print $3}')
  url=https://127.0.0.1:$port/authorize-daemon-agent
  mkdir -p "$dir"
  cat >"$dir/daemon-agent-webhook.kubeconfig" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: imagepulljob-ctl
  cluster:
    server: $url
    certificate-authority: $pki/ca.crt
users:
- name: kube-apiserver
contexts:
- name: default
  context:
    cluster: imagepulljob-ctl
    user: kube-apiserver
current-context: default
EOF
  cat >"$dir/authorization-config.yaml" <<EOF
apiVersion: apiserver.config.k8s.io/v1
kind: AuthorizationConfiguration
authorizers:
- type: Node
  name: node
- type: RBAC
  name: rbac
- type: Webhook
  name: kruise-daemon-agent
  webhook:
    timeout: 3s
    # Short: a Pod get is allowed for the Pod's node at the time, and a Pod's name may
    # come back on another node (a StatefulSet's).
    authorizedTTL: 10s
    unauthorizedTTL: 10s
    subjectAccessReviewVersion: v1
    matchConditionSubjectAccessReviewVersion: v1
    failurePolicy: Deny
    connectionInfo:
      type: KubeConfigFile
      kubeConfigFile: $dir/daemon-agent-webhook.kubeconfig
    matchConditions:
    - expression: request.user == '$agent_user'
    - expression: has(request.resourceAttributes)
    - expression: request.resourceAttributes.verb in ['get', 'list', 'watch']
    - expression: >-
        (request.resourceAttributes.group == 'apps.kruise.io' &&
         request.resourceAttributes.resource in ['nodeimages', 'nodepodprobes', 'containerrecreaterequests']) ||
        (request.resourceAttributes.group == '' && request.resourceAttributes.resource == 'pods')
    - expression: "!has(request.resourceAttributes.subresource) || request.resourceAttributes.subresource == ''"
EOF
}

write_kubeconfig() {
  cat >"$kubeconfig.tmp" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: kruise-local
  cluster:
    server: https://127.0.0.1:$apiserver_port
    certificate-authority: $pki/ca.crt
users:
- name: kruise-admin
  user:
    client-certificate: $pki/admin.crt
    client-key: $pki/admin.key
contexts:
- name: kruise-local
  context:
    cluster: kruise-local
    user: kruise-admin
current-context: kruise-local
EOF
  mv "$kubeconfig.tmp" "$kubeconfig"
}

nodes_ready() {
  local ready
  ready=$(kc get nodes -l type=kwok -o jsonpath='{range .items[*]}{.status.conditions[?(@.type=="Ready")].status}{"\n"}{end}' | grep -c True || true)
  [ "$ready" -ge 4 ]
}

default_sa() { kc -n default get serviceaccount default; }

up() {
  bin=$(bin_dir | tail -n 1)
  mkdir -p "$logs" "$run"
  if all_alive && [ -f "$kubeconfig" ] && kc get --raw=/readyz >/dev/null 2>&1; then
    if [ "$real_node" = 1 ]; then
      if [ ! -f "$run/real-node" ]; then
        log "up without the real node (its apiserver lacks the flags): cluster.sh down first"
        return 1
      fi
      "$here/node.sh" status || "$here/node.sh" up
    fi
    log "already up (kubeconfig: $kubeconfig)"
    return 0
  fi
  stop
  make_pki
  make_webhook_cert imagepulljob-ctl
  make_webhook_client_cert
  write_kubeconfig
  write_authz_config
  local apiserver_real_node=()
  if [ "$real_node" = 1 ]; then
    "$here/node.sh" pki
    apiserver_real_node=(--enable-aggregator-routing=true
      --kubelet-client-certificate "$pki/kubelet-client.crt" --kubelet-client-key "$pki/kubelet-client.key"
      --kubelet-certificate-authority "$pki/ca.crt" --kubelet-preferred-address-types InternalIP,Hostname)
  fi
  local apiserver_extra=()
  read -r -a apiserver_extra <<<"${KRUISE_APISERVER_ARGS:-}"
  local k8s_gates=()
  [ -z "${KRUISE_K8S_FEATURE_GATES:-}" ] || k8s_gates=(--feature-gates "$KRUISE_K8S_FEATURE_GATES")
  # What differs from 1.37 on. The apiserver: no reconciler of the `kubernetes` Service's
  # endpoints, which would name the advertise address, 127.0.0.1; 1.37 refuses to start
  # so ("cannot use public IP 127.0.0.1 with endpoint reconciler": Endpoints and
  # EndpointSlices may not name a loopback address). The Service itself is still made,
  # and nothing here goes through its endpoints (no kube-proxy; node.sh DNATs its
  # ClusterIP to the apiserver). The controller manager: the cloud controllers are gone
  # from it, and --controllers refuses names it does not know.
  local apiserver_version=() kcm_controllers='*,-nodeipam,-cloud-node-lifecycle,-service-lb-controller,-node-route-controller'
  if [ "$k8s_minor" -ge 37 ]; then
    apiserver_version=(--endpoint-reconciler-type none)
    kcm_controllers='*,-nodeipam'
  fi
  local started=$SECONDS

  # A fresh store every start: tests and demos begin from a clean cluster.
  rm -rf "$state/etcd"
  start etcd "$bin/etcd" --name kruise-local --data-dir "$state/etcd" \
    --listen-client-urls "http://127.0.0.1:$etcd_port" --advertise-client-urls "http://127.0.0.1:$etcd_port" \
    --listen-peer-urls "http://127.0.0.1:$etcd_peer_port" --initial-advertise-peer-urls "http://127.0.0.1:$etcd_peer_port" \
    --initial-cluster "kruise-local=http://127.0.0.1:$etcd_peer_port" \
    --listen-metrics-urls "" --unsafe-no-fsync --log-level warn
  wait_for "etcd" 30 curl -sf "http://127.0.0.1:$etcd_port/health"

  start kube-apiserver "$bin/kube-apiserver" \
    --etcd-servers "http://127.0.0.1:$etcd_port" \
    --bind-address 127.0.0.1 --advertise-address 127.0.0.1 --secure-port "$apiserver_port" \
    --tls-cert-file "$pki/apiserver.crt" --tls-private-key-file "$pki/apiserver.key" \
    --client-ca-file "$pki/ca.crt" \
    --service-account-issuer https://kubernetes.default.svc.cluster.local \
    --service-account-key-file "$pki/sa.pub" --service-account-signing-key-file "$pki/sa.key" \
    --authorization-config "$state/authz/authorization-config.yaml" --service-cluster-ip-range 10.0.0.0/24 \
    --admission-control-config-file "$state/admission/admission-config.yaml" \
    --allow-privileged=true --enable-priority-and-fairness=false \
    --max-requests-inflight 2000 --max-mutating-requests-inflight 1000 \
    --event-ttl 30m --profiling=false --v=1 ${apiserver_real_node[@]+"${apiserver_real_node[@]}"} \
    ${apiserver_version[@]+"${apiserver_version[@]}"} ${apiserver_extra[@]+"${apiserver_extra[@]}"} \
    ${k8s_gates[@]+"${k8s_gates[@]}"}
  wait_for "kube-apiserver" 90 kc get --raw=/readyz
  [ "$real_node" = 1 ] && touch "$run/real-node"

  # The node lifecycle controller runs as in any cluster: it removes the
  # node.kubernetes.io/not-ready taint the apiserver puts on every new Node once the
  # Node reports Ready (kwok's nodes, the real node, and the Nodes OpenKruise's e2e
  # suite makes and keeps Ready itself), and taints Nodes that stop reporting.
  start kube-controller-manager "$bin/kube-controller-manager" \
    --kubeconfig "$kubeconfig" --authentication-kubeconfig "$kubeconfig" --authorization-kubeconfig "$kubeconfig" \
    --leader-elect=false --bind-address 127.0.0.1 --secure-port "$kcm_port" \
    --service-account-private-key-file "$pki/sa.key" --root-ca-file "$pki/ca.crt" \
    --use-service-account-credentials=false \
    --controllers "$kcm_controllers" \
    --kube-api-qps 200 --kube-api-burst 400 --concurrent-gc-syncs 20 --profiling=false --v=1 \
    ${k8s_gates[@]+"${k8s_gates[@]}"}
  start kube-scheduler "$bin/kube-scheduler" \
    --kubeconfig "$kubeconfig" --authentication-kubeconfig "$kubeconfig" --authorization-kubeconfig "$kubeconfig" \
    --leader-elect=false --bind-address 127.0.0.1 --secure-port "$scheduler_port" \
    --kube-api-qps 200 --kube-api-burst 400 --profiling=false --v=1 ${k8s_gates[@]+"${k8s_gates[@]}"}
  start kwok "$bin/kwok" --kubeconfig "$kubeconfig" \
    --manage-all-nodes=false --manage-nodes-with-annotation-selector kwok.x-k8s.io/node=fake \
    --node-lease-duration-seconds 40 --cidr 10.244.0.0/16 --node-ip 10.1.0.1 \
    --config "$here/kwok-stages.yaml"

  kc apply -f "$here/manifests/" >/dev/null
  wait_for "4 Ready kwok nodes" 60 nodes_ready
  # The TaintNodesByCondition admission plugin marks new nodes not-ready; the node
  # lifecycle controller (off here: kwok nodes have no kubelet to evict from) would lift it.
  kc taint nodes -l type=kwok node.kubernetes.io/not-ready:NoSchedule- >/dev/null 2>&1 || true
  wait_for "the default ServiceAccount (controller-manager up)" 60 default_sa
  [ "$real_node" = 1 ] && "$here/node.sh" up
  log "up in $((SECONDS - started))s: export KUBECONFIG=$kubeconfig"
}

case "${1:-}" in
  up) up ;;
  down)
    stop
    log "down"
    ;;
  status)
    bin=$(bin_dir | tail -n 1)
    all_alive && kc get --raw=/readyz >/dev/null 2>&1 || exit 1
    [ ! -f "$run/real-node" ] || "$here/node.sh" status
    ;;
  bin) bin_dir | tail -n 1 ;;
  *)
    echo "usage: $0 up|down|status|bin" >&2
    exit 2
    ;;
esac
