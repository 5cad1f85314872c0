#!/usr/bin/env bash
# Stand-ins for the images OpenKruise's daemon suites use (containerrecreaterequest,
# imagepulljob, imagelistpulljob), for a machine that reaches neither registry.k8s.io nor
# Docker Hub: Kubernetes' e2e images (k8s.io/kubernetes v1.32 test/utils/image, as the
# suite's common.WebserverImage, AgnhostImage, NginxImage, ... name them) built from
# Debian's static busybox, pushed to the real node's registry (tests/cluster/node.sh)
# under the same repository paths, and a containerd mirror on real-0 (certs.d hosts.toml)
# that sends pulls of registry.k8s.io there.
#
#   tests/conformance/daemon-images.sh          (run.sh calls it for those suites)
#
# Every stand-in is busybox: `sh` waiting for TERM as its command (agnhost's default
# `pause`, an httpd or nginx that keeps running), `sleep` in PATH (the suites' hooks exec
# `sleep 5` / `sleep 8`); a label with its name and tag gives each its own image ID.
# The pull jobs only pull them; the CRR specs run them without probes, so nothing serves.
#
# Idempotent and cached: an image already in the registry is left alone; built ones are
# kept as OCI archives in $KRUISE_CACHE/e2e-images-<hash of this script and busybox> (default
# ~/.cache/kruise-rs) and pushed from there into a new registry.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
state=${KRUISE_LOCAL_DIR:-$root/.local}
node=$state/node
cache_root=${KRUISE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/kruise-rs}

log() { echo "daemon-images: $*" >&2; }

[ -f "$state/run/real-node" ] || { log "no real node in $state (KRUISE_REAL_NODE=1 tests/cluster/cluster.sh up)"; exit 1; }
registry=$("$root/tests/cluster/node.sh" env | sed -n 's/^KRUISE_REGISTRY=//p')

# registry.k8s.io/e2e-test-images/<name>:<tag> (k8s.io/kubernetes v1.32.10
# test/utils/image/manifest.go: Httpd, HttpdNew, Nginx, NginxNew, BusyBox, Agnhost).
images=(
  e2e-test-images/httpd:2.4.38-4
  e2e-test-images/httpd:2.4.39-4
  e2e-test-images/nginx:1.14-4
  e2e-test-images/nginx:1.15-4
  e2e-test-images/busybox:1.36.1-1
  e2e-test-images/agnhost:2.53
)
# The registries whose pulls go to the local one.
mirrored=(registry.k8s.io)

stamp=$({ cat "${BASH_SOURCE[0]}"; sha256sum /usr/bin/busybox; } | sha256sum | cut -c1-12)
cache=$cache_root/e2e-images-$stamp
buildah_() { buildah --storage-driver vfs --root "$node/buildah/root" --runroot "$node/buildah/run" "$@"; }

has_image() { # repo tag
  curl -sf -o /dev/null -H 'Accept: application/vnd.oci.image.manifest.v1+json' \
    -H 'Accept: application/vnd.docker.distribution.manifest.v2+json' "http://$registry/v2/$1/manifests/$2"
}

build() { # repo tag archive
  local ctx=$node/buildah/e2e-ctx
  if [ ! -d "$ctx/bin" ]; then
    mkdir -p "$ctx/bin"
    cp /usr/bin/busybox "$ctx/bin/busybox"
    for applet in $(/usr/bin/busybox --list); do
      [ "$applet" = busybox ] || ln -sf busybox "$ctx/bin/$applet"
    done
  fi
  cat >"$ctx/Containerfile" <<EOF
FROM scratch
COPY bin /bin
ENV PATH=/bin
LABEL org.opencontainers.image.ref.name="registry.k8s.io/$1:$2" io.kruise-rs.stand-in="busybox"
CMD ["sh", "-c", "trap 'exit 0' TERM; sleep 2147483647 & wait"]
EOF
  buildah_ bud --quiet --isolation chroot -f "$ctx/Containerfile" -t "localhost/$1:$2" "$ctx" >/dev/null
  rm -f "$3.tmp"
  buildah_ push --quiet "localhost/$1:$2" "oci-archive:$3.tmp"
  mv "$3.tmp" "$3"
}

mkdir -p "$cache"
for ref in "${images[@]}"; do
  repo=${ref%%:*} tag=${ref#*:}
  has_image "$repo" "$tag" && continue
  archive=$cache/$(echo "$repo" | tr / _)_$tag.tar
  if [ ! -f "$archive" ]; then
    log "building the stand-in for registry.k8s.io/$ref"
    build "$repo" "$tag" "$archive"
  fi
  id=$(buildah_ pull --quiet "oci-archive:$archive" | tail -n 1)
  buildah_ push --quiet --tls-verify=false "$id" "docker://$registry/$repo:$tag"
  log "pushed $registry/$repo:$tag"
done

# containerd (1.6) reads certs.d at every pull: no restart.
for host in "${mirrored[@]}"; do
  dir=$node/containerd/certs.d/$host
  mkdir -p "$dir"
  cat >"$dir/hosts.toml.tmp" <<EOF
# Written by tests/conformance/daemon-images.sh: pulls of $host come from the local registry.
server = "https://$host"
[host."http://$registry"]
  capabilities = ["pull", "resolve"]
  skip_verify = true
EOF
  mv "$dir/hosts.toml.tmp" "$dir/hosts.toml"
done
log "registry.k8s.io/e2e-test-images mirrored to $registry on real-0"
