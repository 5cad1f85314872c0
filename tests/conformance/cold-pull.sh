#!/usr/bin/env bash
# A cold image cache behind a slow registry on the real node real-0, for the specs that
# need an image pull lasting a few seconds (run.sh: the pull suites' specs of
# real-node.txt, one at a time).
#
#   tests/conformance/cold-pull.sh on    start slow-registry.py in front of real-0's
#                                        registry, point the containerd mirrors of
#                                        registry.k8s.io and docker.io at it, and forget the
#                                        stand-in images on real-0 (every reference and
#                                        their content), so the next pull of one comes
#                                        through the slow registry
#   tests/conformance/cold-pull.sh off   stop it; the mirrors go back to the registry
#                                        itself (stand-in-images.sh)
#
# Why: upstream's ImagePullJob specs "pull image with secret" (v1alpha1) and "... and ttl
# cleaned", "... and completed" (v1beta1) look for the job's copy of its pull secret in
# kruise-daemon-config about a second after creating the job, and the copy lives only
# until the job completes. On kind the image comes from a remote registry, and
# kruise-daemon reports a pull 3-5 s after starting it; our node agent reports as soon as
# the pull ends, and real-0 has the image already or pulls it from a local registry in
# well under a second. A cold cache and SLOW_REGISTRY_DELAY (default 1.5 s) per request
# make the pull last several seconds, as on a fresh node with a remote registry.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
state=${KRUISE_LOCAL_DIR:-$root/.local}
node=$state/node
pidfile=$state/run/slow-registry.pid
delay=${SLOW_REGISTRY_DELAY:-1.5}

log() { echo "cold-pull: $*" >&2; }

[ -f "$state/run/real-node" ] || { log "no real node in $state (KRUISE_REAL_NODE=1 tests/cluster/cluster.sh up)"; exit 1; }
node_env=$("$root/tests/cluster/node.sh" env)
registry=$(sed -n 's/^KRUISE_REGISTRY=//p' <<<"$node_env")
sock=$(sed -n 's/^KRUISE_CONTAINERD_SOCKET=//p' <<<"$node_env")
slow=127.0.0.1:${SLOW_REGISTRY_PORT:-$((${registry##*:} + 2))}
# The registries stand-in-images.sh mirrors, and the repositories of its stand-ins there.
mirrored=(registry.k8s.io docker.io)
stand_in_refs='^(registry\.k8s\.io/e2e-test-images/|docker\.io/(library|openkruise)/)'

running() { [ -f "$pidfile" ] && kill -0 "$(cat "$pidfile")" 2>/dev/null; }
ctr_() { ctr --address "$sock" -n k8s.io "$@"; }

case ${1:-} in
  on)
    if ! running; then
      mkdir -p "$state/run" "$state/logs"
      setsid python3 "$here/slow-registry.py" "$slow" "$registry" "$delay" \
        >>"$state/logs/slow-registry.log" 2>&1 </dev/null &
      echo $! >"$pidfile"
      for _ in $(seq 50); do curl -sf -o /dev/null "http://$slow/v2/" && break; sleep 0.1; done
      curl -sf -o /dev/null "http://$slow/v2/" || { log "slow-registry.py does not answer on $slow ($state/logs/slow-registry.log)"; exit 1; }
      log "slow registry on $slow in front of $registry (${delay}s per request)"
    fi
    for host in "${mirrored[@]}"; do
      dir=$node/containerd/certs.d/$host
      mkdir -p "$dir"
      cat >"$dir/hosts.toml.tmp" <<EOF
# Written by tests/conformance/cold-pull.sh: pulls of $host come slowly from the local registry.
server = "https://$host"
[host."http://$slow"]
  capabilities = ["pull", "resolve"]
  skip_verify = true
EOF
      mv "$dir/hosts.toml.tmp" "$dir/hosts.toml"
    done
    # Every reference to a stand-in image: its names and the image ID reference the CRI
    # adds (sha256:<config digest>, same target digest), then the content is collected.
    listing=$(ctr_ images ls 2>/dev/null | tail -n +2 || true)
    digests=$(awk -v re="$stand_in_refs" '$1 ~ re { print $3 }' <<<"$listing" | sort -u)
    refs=()
    if [ -n "$digests" ]; then
      mapfile -t refs < <(awk 'NR == FNR { want[$1] = 1; next } want[$3] { print $1 }' <(echo "$digests") <(echo "$listing"))
    fi
    if [ ${#refs[@]} -gt 0 ]; then
      ctr_ images rm --sync "${refs[@]}" >/dev/null
    fi
    log "real-0 forgot ${#refs[@]} stand-in image references; ${mirrored[*]} now come through $slow"
    ;;
  off)
    if running; then
      kill "$(cat "$pidfile")" 2>/dev/null || true
    fi
    rm -f "$pidfile"
    "$here/stand-in-images.sh"
    ;;
  *)
    echo "usage: $0 on|off" >&2
    exit 2
    ;;
esac
