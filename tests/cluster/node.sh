#!/usr/bin/env bash
# The real node `real-0` of the local cluster (opt-in: KRUISE_REAL_NODE=1 cluster.sh up,
# or `make up-real`): a kubelet v1.33 (build-node.sh; KRUISE_K8S_VERSION's version when set)
# on containerd + runc (Debian), Pod networking with the CNI bridge plugin on a private /24,
# and a plain-http registry on
# 127.0.0.1 that the images come from, with a second one beside it (port + 1) that wants a
# login (htpasswd), for pulls with a pull secret. Only Pods tolerating node.kruise.io/real=true:NoSchedule
# land there; the kwok nodes stay the default.
#
#   node.sh pki     certificates the apiserver needs before it starts (cluster.sh calls it)
#   node.sh up      registry, containerd, kubelet; waits for the Node to be Ready
#   node.sh down    stops them, removes every Pod's containers, mounts, cgroups, the bridge,
#                   our iptables chain, and restores what they changed on the host
#   node.sh status  exit 0 when the three processes are alive
#   node.sh env     print the node's settings (registry, containerd socket) as KEY=value
#
# Everything lives under $KRUISE_LOCAL_DIR/node (default .local/node). Ports and names can
# be moved (a second cluster on the same machine): KRUISE_REGISTRY_PORT (15000),
# KRUISE_KUBELET_PORT (20250; healthz on +1), KRUISE_NODE_POD_CIDR (10.89.0.0/24),
# KRUISE_NODE_BRIDGE (kruise0), KRUISE_NODE_IP (default: the address of the default route).
#
# What cannot be moved, so only one real node per machine at a time: the kubelet's fixed
# paths (/var/lib/kubelet/device-plugins, /var/log/containers), the `kubepods` cgroups and
# containerd 1.6's shim sockets under /run/containerd. `down` removes each of them when
# `up` found it absent, and restores the sysctls the kubelet and the bridge plugin set
# (vm.overcommit_memory, kernel.panic, kernel.panic_on_oops, net.ipv4.ip_forward).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=k8s-version.sh
. "$here/k8s-version.sh"
root=$(cd "$here/../.." && pwd)
state=${KRUISE_LOCAL_DIR:-$root/.local}
pki=$state/pki
logs=$state/logs
run=$state/run
kubeconfig=$state/kubeconfig
node=$state/node
apiserver_port=${KRUISE_APISERVER_PORT:-16443}
registry_port=${KRUISE_REGISTRY_PORT:-15000}
kubelet_port=${KRUISE_KUBELET_PORT:-20250}
kubelet_healthz_port=$((kubelet_port + 1))
pod_cidr=${KRUISE_NODE_POD_CIDR:-10.89.0.0/24}
bridge=${KRUISE_NODE_BRIDGE:-kruise0}
node_name=real-0
registry=127.0.0.1:$registry_port
# The registry that wants a login: the same test images, pulled only with these
# credentials (a local test account, bound to 127.0.0.1; the e2e tests know it).
private_registry=127.0.0.1:$((registry_port + 1))
private_user=kruise-e2e
private_password=kruise-e2e-pull
sock=$node/run/containerd.sock
components=(registry private-registry containerd kubelet)
# The `kubernetes` Service's ClusterIP (cluster.sh: --service-cluster-ip-range 10.0.0.0/24).
kubernetes_service_ip=10.0.0.1
# Our iptables chain (nat): Pods reach the apiserver through the `kubernetes` Service.
chain="KRUISE-$(echo "$state" | sha256sum | cut -c1-8)"
# What the kubelet, containerd and the CNI bridge plugin change on the host.
# (Restored in this order: writing ip_forward resets every interface's forwarding and
# accept_redirects.) The paths are removed by `down` when `up` found them absent: the
# kubelet's fixed ones, containerd's shim sockets, libcni's result cache, and what
# buildah/containers-image create (/etc/cni/net.d/cni.lock, /var/lib/containers/cache).
host_sysctls=(vm.overcommit_memory kernel.panic kernel.panic_on_oops net.ipv4.ip_forward
  net.ipv4.conf.all.forwarding net.ipv4.conf.default.forwarding
  net.ipv4.conf.all.accept_redirects net.ipv4.conf.default.accept_redirects)
host_paths=(/var/lib/kubelet /var/log/containers /var/log/pods /run/containerd /var/lib/cni /opt/containerd
  /etc/cni /var/lib/containers /run/containers /run/xtables.lock /run/mount)

log() { echo "node: $*" >&2; }

node_ip() {
  if [ -n "${KRUISE_NODE_IP:-}" ]; then echo "$KRUISE_NODE_IP"; return; fi
  local ip
  ip=$(ip -4 route get 1.1.1.1 2>/dev/null | sed -n 's/.* src \([0-9.]*\).*/\1/p' | head -n 1)
  [ -n "$ip" ] || ip=$(ip -4 -o addr show scope global | awk '{sub("/.*", "", $4); print $4; exit}')
  [ -n "$ip" ] || { log "no non-loopback IPv4 address (the kubelet rejects 127.0.0.1); set KRUISE_NODE_IP"; exit 1; }
  echo "$ip"
}

# The bridge's address (the Pods' gateway): the CIDR's first host.
gateway() { local net=${pod_cidr%/*}; echo "${net%.*}.$((${net##*.} + 1))"; }

pid_alive() { local f=$run/$1.pid; [ -f "$f" ] && kill -0 "$(cat "$f")" 2>/dev/null; }

start() { # name command...
  local name=$1
  shift
  setsid "$@" >"$logs/$name.log" 2>&1 </dev/null &
  echo $! >"$run/$name.pid"
}

stop_one() { # name
  local f=$run/$1.pid
  [ -f "$f" ] || return 0
  local pid
  pid=$(cat "$f")
  kill "$pid" 2>/dev/null || true
  for _ in $(seq 1 60); do kill -0 "$pid" 2>/dev/null || break; sleep 0.25; done
  kill -9 "$pid" 2>/dev/null || true
  rm -f "$f"
}

wait_for() { # what timeout command...
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

need_tools() {
  local missing=()
  for t in containerd runc ctr buildah docker-registry htpasswd busybox iptables nft; do
    command -v "$t" >/dev/null 2>&1 || missing+=("$t")
  done
  [ -x /usr/lib/cni/bridge ] || missing+=(containernetworking-plugins)
  if [ ${#missing[@]} -gt 0 ]; then
    log "missing ${missing[*]}: run tests/deps.sh --real-node"
    exit 1
  fi
  [ "$(id -u)" -eq 0 ] || { log "the kubelet and containerd need root"; exit 1; }
}

# --- certificates ---

cert() { # name subject san-or-empty usage
  local name=$1 subject=$2 san=$3 usage=$4
  [ -f "$pki/$name.crt" ] && return 0
  (
    cd "$pki"
    { [ -n "$san" ] && echo "subjectAltName=$san"; echo "extendedKeyUsage=$usage"; } >"$name.ext"
    openssl req -newkey rsa:2048 -nodes -keyout "$name.key" -out "$name.csr" -subj "$subject" 2>/dev/null
    openssl x509 -req -in "$name.csr" -CA ca.crt -CAkey ca.key -CAcreateserial -out "$name.crt" \
      -days 3650 -extfile "$name.ext" 2>/dev/null
    rm -f "$name.csr" "$name.ext" ca.srl
  )
}

make_pki() {
  [ -f "$pki/ca.key" ] || { log "no cluster CA in $pki: start the cluster with cluster.sh"; exit 1; }
  local ip
  ip=$(node_ip)
  # The apiserver's client certificate at the kubelet (logs, exec, port-forward).
  cert kubelet-client "/O=system:masters/CN=kube-apiserver-kubelet-client" "" clientAuth
  # The kubelet: system:node:real-0 in system:nodes (the Node authorizer) and its serving
  # certificate on the node IP, which the apiserver verifies.
  cert "node-$node_name" "/O=system:nodes/CN=system:node:$node_name" "" clientAuth
  if [ -f "$pki/kubelet-serving.crt" ] && ! openssl x509 -in "$pki/kubelet-serving.crt" -noout -text | grep -q "IP Address:$ip\b"; then
    rm -f "$pki/kubelet-serving.crt" # the machine's address changed
  fi
  cert kubelet-serving "/CN=$node_name" "IP:$ip,IP:127.0.0.1,DNS:$node_name,DNS:localhost" serverAuth
}

# --- host state ---

save_host_state() {
  mkdir -p "$node/host"
  # Saved once: after an interrupted run the files still hold the state found before it.
  if [ ! -f "$node/host/sysctl" ]; then
    for s in "${host_sysctls[@]}"; do echo "$s=$(sysctl -n "$s")"; done >"$node/host/sysctl.tmp"
    mv "$node/host/sysctl.tmp" "$node/host/sysctl"
  fi
  if [ ! -f "$node/host/absent-paths" ]; then
    for p in "${host_paths[@]}"; do [ -e "$p" ] || echo "$p"; done >"$node/host/absent-paths.tmp"
    mv "$node/host/absent-paths.tmp" "$node/host/absent-paths"
  fi
  if [ ! -f "$node/host/nat-table" ]; then
    # iptables-nft creates the (nf_tables) table `ip nat` for our chain; nft deletes it again.
    # (Plain iptables-save: with `-t nat` it prints the table even when there is none.)
    if iptables-save 2>/dev/null | grep -q '^\*nat'; then echo present; else echo absent; fi >"$node/host/nat-table"
  fi
  if [ ! -f "$node/host/absent-cgroups" ]; then
    for d in /sys/fs/cgroup/*/; do [ -e "$d/kubepods" ] || echo "${d}kubepods"; done >"$node/host/absent-cgroups.tmp"
    mv "$node/host/absent-cgroups.tmp" "$node/host/absent-cgroups"
  fi
}

restore_host_state() {
  if [ -f "$node/host/sysctl" ]; then
    while IFS='=' read -r key value; do
      [ "$(sysctl -n "$key")" = "$value" ] || sysctl -q -w "$key=$value" >/dev/null
    done <"$node/host/sysctl"
    rm -f "$node/host/sysctl"
  fi
  if [ -f "$node/host/nat-table" ]; then
    if [ "$(cat "$node/host/nat-table")" = absent ] && command -v nft >/dev/null 2>&1 &&
      iptables -V | grep -q nf_tables && ! iptables-save -t nat | grep -q '^-A'; then
      nft delete table ip nat 2>/dev/null || true
    fi
    rm -f "$node/host/nat-table"
  fi
  if [ -f "$node/host/absent-cgroups" ]; then
    local cg
    while read -r cg; do
      # Depth first; a cgroup with processes left refuses (they were killed before).
      [ -d "$cg" ] && find "$cg" -depth -type d -exec rmdir {} + 2>/dev/null || true
      [ -d "$cg" ] && log "could not remove $cg: $(find "$cg" -name cgroup.procs -exec cat {} + 2>/dev/null | tr '\n' ' ')"
    done <"$node/host/absent-cgroups"
    rm -f "$node/host/absent-cgroups"
  fi
  if [ -f "$node/host/absent-paths" ]; then
    local p
    while read -r p; do
      [ -n "$p" ] && [ -e "$p" ] && rm -rf "$p"
    done <"$node/host/absent-paths"
    rm -f "$node/host/absent-paths"
  fi
}

network_up() {
  if ! ip link show "$bridge" >/dev/null 2>&1; then
    ip link add "$bridge" type bridge
    ip addr add "$(gateway)/${pod_cidr#*/}" dev "$bridge"
  fi
  ip link set "$bridge" up
  # The apiserver listens on 127.0.0.1 only. A Pod reaches it through the `kubernetes`
  # Service (10.0.0.1:443, what in-cluster clients use, in the apiserver certificate) by a
  # DNAT to 127.0.0.1, which the kernel routes only with route_localnet on the bridge
  # (on this interface only; it disappears with it).
  sysctl -q -w "net.ipv4.conf.$bridge.route_localnet=1" >/dev/null
  iptables -w -t nat -N "$chain" 2>/dev/null || iptables -w -t nat -F "$chain"
  iptables -w -t nat -A "$chain" -s "$pod_cidr" -d "$kubernetes_service_ip/32" -p tcp --dport 443 \
    -j DNAT --to-destination "127.0.0.1:$apiserver_port"
  iptables -w -t nat -C PREROUTING -j "$chain" 2>/dev/null || iptables -w -t nat -I PREROUTING -j "$chain"
  mkdir -p "$node/cni/net.d" "$node/cni/ipam"
  cat >"$node/cni/net.d/10-kruise.conflist" <<EOF
{
  "cniVersion": "0.4.0",
  "name": "kruise-real-node",
  "plugins": [
    {
      "type": "bridge",
      "bridge": "$bridge",
      "isGateway": true,
      "ipMasq": false,
      "hairpinMode": true,
      "ipam": {
        "type": "host-local",
        "ranges": [[{"subnet": "$pod_cidr", "gateway": "$(gateway)"}]],
        "routes": [{"dst": "0.0.0.0/0"}],
        "dataDir": "$node/cni/ipam"
      }
    }
  ]
}
EOF
}

network_down() {
  if command -v iptables >/dev/null 2>&1; then
    while iptables -w -t nat -D PREROUTING -j "$chain" 2>/dev/null; do :; done
    iptables -w -t nat -F "$chain" 2>/dev/null || true
    iptables -w -t nat -X "$chain" 2>/dev/null || true
  fi
  ip link del "$bridge" 2>/dev/null || true
  rm -rf "$node/cni/ipam"
}

# --- registry and images ---

registry_up() {
  mkdir -p "$node/registry"
  cat >"$node/registry.yml" <<EOF
version: 0.1
log:
  level: warn
  accesslog:
    disabled: true
storage:
  filesystem:
    rootdirectory: $node/registry
  delete:
    enabled: true
http:
  addr: $registry
  secret: kruise-rs-local
EOF
  pid_alive registry || start registry docker-registry serve "$node/registry.yml"
  wait_for "the registry on $registry" 30 curl -sf "http://$registry/v2/"

  # distribution reads only bcrypt htpasswd files.
  mkdir -p "$node/registry-private"
  htpasswd -Bbn "$private_user" "$private_password" >"$node/registry-private.htpasswd"
  cat >"$node/registry-private.yml" <<EOF
version: 0.1
log:
  level: warn
  accesslog:
    disabled: true
storage:
  filesystem:
    rootdirectory: $node/registry-private
http:
  addr: $private_registry
  secret: kruise-rs-local-private
auth:
  htpasswd:
    realm: kruise-rs-private
    path: $node/registry-private.htpasswd
EOF
  pid_alive private-registry || start private-registry docker-registry serve "$node/registry-private.yml"
  wait_for "the registry on $private_registry" 30 curl -sf -u "$private_user:$private_password" "http://$private_registry/v2/"
}

buildah_() { buildah --storage-driver vfs --root "$node/buildah/root" --runroot "$node/buildah/run" "$@"; }

has_image() { # name tag [registry [curl options]]
  curl -sf -o /dev/null -H 'Accept: application/vnd.oci.image.manifest.v1+json' "${@:4}" \
    -H 'Accept: application/vnd.docker.distribution.manifest.v2+json' "http://${3:-$registry}/v2/$1/manifests/$2"; }

# Test images from Debian's static busybox, FROM scratch, nothing pulled: pause (the
# sandbox image: a shell waiting for TERM) and busybox:1 / busybox:2 (same files but a
# label, so two image IDs for in-place updates).
test_images() {
  local ctx=$node/buildah/ctx
  rm -rf "$ctx"
  mkdir -p "$ctx/bin"
  cp /usr/bin/busybox "$ctx/bin/busybox"
  for applet in $(/usr/bin/busybox --list); do
    [ "$applet" = busybox ] || ln -s busybox "$ctx/bin/$applet"
  done
  local name tag
  for ref in pause:1 busybox:1 busybox:2; do
    # Built once per registry (kept by down): a change here needs a new tag.
    name=kruise-rs/${ref%%:*} tag=${ref#*:}
    has_image "$name" "$tag" && continue
    if [ "${ref%%:*}" = pause ]; then
      cat >"$ctx/Containerfile" <<'EOF'
FROM scratch
COPY bin/busybox /bin/busybox
USER 65535:65535
ENTRYPOINT ["/bin/busybox", "sh", "-c", "trap 'exit 0' TERM INT; /bin/busybox sleep 2147483647 & wait"]
EOF
    else
      cat >"$ctx/Containerfile" <<EOF
FROM scratch
COPY bin /bin
LABEL org.opencontainers.image.version="$tag"
ENV PATH=/bin
CMD ["sh", "-c", "trap 'exit 0' TERM; echo started; while true; do sleep 1; done"]
EOF
    fi
    buildah_ bud --quiet --isolation chroot -f "$ctx/Containerfile" -t "localhost/$name:$tag" "$ctx" >/dev/null
    buildah_ push --quiet --tls-verify=false "localhost/$name:$tag" "docker://$registry/$name:$tag"
    log "pushed $registry/$name:$tag"
  done
  # busybox:1 again as kruise-rs/private:1, behind the login.
  has_image kruise-rs/private 1 "$private_registry" -u "$private_user:$private_password" && return 0
  buildah_ pull --quiet --tls-verify=false "docker://$registry/kruise-rs/busybox:1" >/dev/null
  buildah_ push --quiet --tls-verify=false --creds "$private_user:$private_password" \
    "$registry/kruise-rs/busybox:1" "docker://$private_registry/kruise-rs/private:1"
  log "pushed $private_registry/kruise-rs/private:1"
}

# --- containerd ---

containerd_up() {
  mkdir -p "$node/run" "$node/containerd/certs.d/$registry"
  cat >"$node/containerd/certs.d/$registry/hosts.toml" <<EOF
server = "http://$registry"
[host."http://$registry"]
  capabilities = ["pull", "resolve", "push"]
  skip_verify = true
EOF
  mkdir -p "$node/containerd/certs.d/$private_registry"
  cat >"$node/containerd/certs.d/$private_registry/hosts.toml" <<EOF
server = "http://$private_registry"
[host."http://$private_registry"]
  capabilities = ["pull", "resolve"]
  skip_verify = true
EOF
  cat >"$node/containerd/config.toml" <<EOF
version = 2
root = "$node/containerd/root"
state = "$node/containerd/state"
disabled_plugins = ["io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs",
  "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.aufs"]

[grpc]
  address = "$sock"
[ttrpc]
  address = "$sock.ttrpc"
[debug]
  address = "$node/run/containerd-debug.sock"
  level = "info"

[plugins."io.containerd.internal.v1.opt"]
  path = "$node/containerd/opt"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "$registry/kruise-rs/pause:1"
  # Root lacks CAP_SYS_RESOURCE here: runc cannot set a negative oom_score_adj ("can't get
  # final child's PID from pipe: EOF"); this keeps the kubelet's values at or above ours.
  restrict_oom_score_adj = true
  netns_mounts_under_state_dir = true
  enable_selinux = false
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        Root = "$node/runc"
        SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "$node/cni/net.d"
    max_conf_num = 1
  [plugins."io.containerd.grpc.v1.cri".registry]
    config_path = "$node/containerd/certs.d"
EOF
  pid_alive containerd || start containerd containerd --config "$node/containerd/config.toml"
  wait_for "containerd on $sock" 30 ctr --address "$sock" version
}

# --- kubelet ---

kubelet_up() {
  local ip=$1 kubelet=$2
  mkdir -p "$node/kubelet" "$node/pod-logs"
  cat >"$node/kubelet.kubeconfig" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: kruise-local
  cluster:
    server: https://127.0.0.1:$apiserver_port
    certificate-authority: $pki/ca.crt
users:
- name: $node_name
  user:
    client-certificate: $pki/node-$node_name.crt
    client-key: $pki/node-$node_name.key
contexts:
- name: $node_name
  context:
    cluster: kruise-local
    user: $node_name
current-context: $node_name
EOF
  cat >"$node/kubelet.yaml" <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: $ip
port: $kubelet_port
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: $kubelet_healthz_port
tlsCertFile: $pki/kubelet-serving.crt
tlsPrivateKeyFile: $pki/kubelet-serving.key
authentication:
  anonymous:
    enabled: false
  webhook:
    enabled: false
  x509:
    clientCAFile: $pki/ca.crt
authorization:
  mode: AlwaysAllow
containerRuntimeEndpoint: unix://$sock
imageServiceEndpoint: unix://$sock
cgroupDriver: cgroupfs
failSwapOn: false
clusterDNS: []
clusterDomain: cluster.local
serializeImagePulls: false
podLogsDir: $node/pod-logs
# No KUBE-FIREWALL / canary chains: Pods reach nothing on 127.0.0.1 but the DNAT'ed apiserver.
makeIPTablesUtilChains: false
registerWithTaints:
- key: node.kruise.io/real
  value: "true"
  effect: NoSchedule
# A shared disk that is mostly full already: never evict or garbage-collect for it here.
evictionHard:
  memory.available: 100Mi
  nodefs.available: 1%
  imagefs.available: 1%
  nodefs.inodesFree: 1%
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
nodeStatusUpdateFrequency: 10s
EOF
  # cluster.sh's KRUISE_K8S_FEATURE_GATES (Name=true,...), as the kubelet's featureGates.
  if [ -n "${KRUISE_K8S_FEATURE_GATES:-}" ]; then
    echo "featureGates:" >>"$node/kubelet.yaml"
    tr ',' '\n' <<<"$KRUISE_K8S_FEATURE_GATES" | sed -n 's/^ *\([A-Za-z0-9]*\)=\(true\|false\) *$/  \1: \2/p' >>"$node/kubelet.yaml"
  fi
  pid_alive kubelet || start kubelet "$kubelet" --config "$node/kubelet.yaml" \
    --kubeconfig "$node/kubelet.kubeconfig" --root-dir "$node/kubelet" \
    --hostname-override "$node_name" --node-ip "$ip" \
    --node-labels node.kruise.io/real=true --v=1
}

kc() { "$kubectl" --kubeconfig "$kubeconfig" "$@"; }

node_ready() {
  [ "$(kc get node "$node_name" -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}')" = True ]
}

up() {
  need_tools
  local started=$SECONDS ip kubelet
  ip=$(node_ip)
  kubelet=$("$k8s_dir/build-node.sh" | tail -n 1)/kubelet
  kubectl=$("$k8s_dir/build.sh" | tail -n 1)/kubectl
  mkdir -p "$node/run" "$logs" "$run"
  make_pki
  save_host_state
  registry_up
  test_images
  network_up
  containerd_up
  kubelet_up "$ip" "$kubelet"
  wait_for "Node $node_name Ready" 90 node_ready
  # As for the kwok nodes: the node lifecycle controller is off, so nothing lifts the
  # not-ready taint admission put on the new Node.
  kc taint nodes "$node_name" node.kubernetes.io/not-ready:NoSchedule- >/dev/null 2>&1 || true
  kc annotate --overwrite node "$node_name" "node.kruise.io/registry=$registry" \
    "node.kruise.io/private-registry=$private_registry" "node.kruise.io/containerd-socket=$sock" >/dev/null
  log "$node_name Ready in $((SECONDS - started))s (node IP $ip, registry $registry, Pods $pod_cidr)"
}

# Every process of ours still in a container: a shim of our containerd and whatever runs
# in the kubepods cgroups we created.
leftover_pids() {
  local p
  for p in /proc/[0-9]*; do
    if { tr '\0' ' ' <"$p/cmdline"; } 2>/dev/null | grep -q -- "containerd-shim.*-address $sock "; then
      echo "${p#/proc/}"
    fi
  done
  if [ -f "$node/host/absent-cgroups" ]; then
    while read -r cg; do
      if [ -d "$cg" ]; then find "$cg" -name cgroup.procs -exec cat {} + 2>/dev/null || true; fi
    done <"$node/host/absent-cgroups"
  fi
  return 0
}

down() {
  [ -d "$node" ] || return 0
  stop_one kubelet
  if pid_alive containerd; then
    # Stop every container and sandbox (the CNI plugin releases its addresses on the
    # sandbox's stop, through the CRI; a killed task is enough for the rest).
    local id
    for id in $(ctr --address "$sock" -n k8s.io tasks ls -q 2>/dev/null); do
      ctr --address "$sock" -n k8s.io tasks kill -s SIGKILL "$id" >/dev/null 2>&1 || true
    done
    sleep 0.5
    for id in $(ctr --address "$sock" -n k8s.io tasks ls -q 2>/dev/null); do
      ctr --address "$sock" -n k8s.io tasks delete -f "$id" >/dev/null 2>&1 || true
    done
  fi
  stop_one containerd
  local pids
  pids=$(leftover_pids | sort -u)
  if [ -n "$pids" ]; then
    # shellcheck disable=SC2086
    kill -9 $pids 2>/dev/null || true
    sleep 0.5
  fi
  # Unmount what lives under our directories (the kubelet's shared bind mount of its root,
  # volumes, sandbox network namespaces and shm, container root filesystems), deepest first.
  local m
  for _ in 1 2 3; do
    m=$(findmnt -rn -o TARGET | grep -E "^($node|/run/containerd)(/|$)" | sort -r || true)
    [ -z "$m" ] && break
    # shellcheck disable=SC2086
    umount $m 2>/dev/null || umount -l $m 2>/dev/null || true
  done
  network_down
  restore_host_state
  rm -rf "$node/kubelet" "$node/containerd/root" "$node/containerd/state" "$node/runc" "$node/pod-logs" "$node/run"
  stop_one registry
  stop_one private-registry
}

case "${1:-}" in
  pki) make_pki ;;
  up) up ;;
  down) down ;;
  status) for c in "${components[@]}"; do pid_alive "$c" || exit 1; done ;;
  env)
    echo "KRUISE_REAL_NODE_NAME=$node_name"
    echo "KRUISE_REGISTRY=$registry"
    echo "KRUISE_PRIVATE_REGISTRY=$private_registry"
    echo "KRUISE_CONTAINERD_SOCKET=$sock"
    ;;
  *)
    echo "usage: $0 pki|up|down|status|env" >&2
    exit 2
    ;;
esac
