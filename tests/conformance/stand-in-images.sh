#!/usr/bin/env bash
# Stand-ins for the images OpenKruise's e2e specs run on the real node real-0 (the
# kruise-daemon suites, the specs of real-node.txt), for a machine that reaches neither
# registry.k8s.io nor Docker Hub: Kubernetes' e2e images (k8s.io/kubernetes v1.32
# test/utils/image, as the suite's common.WebserverImage, AgnhostImage, NginxImage,
# RedisImage, ... name them), docker.io/library/nginx:alpine and :mainline-alpine and
# docker.io/library/busybox:latest, built
# from Debian's static busybox, pushed to the real node's registry (tests/cluster/node.sh)
# under the same repository paths, and a containerd mirror on real-0 (certs.d hosts.toml)
# that sends pulls of registry.k8s.io and docker.io there.
#
#   tests/conformance/stand-in-images.sh          (run.sh calls it before a pass on real-0)
#
# Each stand-in does what the specs rely on of the real image, with busybox's applets in
# /bin (`sleep`, `test`, `dd`, `mv`, `hostname`, ... for the specs' exec commands and hooks,
# and /bin/bash running busybox's sh):
#   httpd, nginx   serve their document root over HTTP on port 80 (busybox httpd), with
#                  the index.html the specs' readiness probes GET and move away and back
#                  (/usr/local/apache2/htdocs, /usr/share/nginx/html)
#   busybox        `sh` as the command, which exits at once without a terminal, as the
#                  real image does (a spec makes a container crash with it)
#   agnhost, redis keep running until TERM (agnhost's default `pause`; nothing talks to redis)
#   probe          PodProbeMarker's openkruise/minecraft-demo:probe-v0: keeps running, with
#                  the /probe.sh its spec execs (`bash ./probe.sh`) answering as the game
#                  server's does while it starts: the first call fails, the second prints
#                  "data", every later one "gate" (podprobemarker.go waits for the three in
#                  turn)
# A label with its name and tag gives each its own image ID, except nginx:mainline-alpine,
# which is nginx:alpine's manifest under a second tag, as Docker Hub serves both tags with
# one digest ("in-place update images with the same imageID").
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

log() { echo "stand-in-images: $*" >&2; }

[ -f "$state/run/real-node" ] || { log "no real node in $state (KRUISE_REAL_NODE=1 tests/cluster/cluster.sh up)"; exit 1; }
registry=$("$root/tests/cluster/node.sh" env | sed -n 's/^KRUISE_REGISTRY=//p')

# <repository>:<tag> <kind>: registry.k8s.io/e2e-test-images/... (k8s.io/kubernetes v1.32.10
# test/utils/image/manifest.go: Httpd, HttpdNew, Nginx, NginxNew, BusyBox, Agnhost, Redis)
# and docker.io/library/nginx (the CloneSet specs' imageConfig.SetRegistry("docker.io/library")),
# docker.io/library/busybox (the SidecarSet specs' Deployment: "busybox:latest"),
# docker.io/library/nginx:latest (SidecarTerminator's sidecar, "nginx:latest"), and
# PodProbeMarker's nginx:1.15.1, centos:7 (`sleep 999d`) and openkruise/minecraft-demo:probe-v0
# (test/e2e/framework/v1alpha1/pod_probe_marker_util.go).
images=(
  "e2e-test-images/httpd:2.4.38-4 httpd"
  "e2e-test-images/httpd:2.4.39-4 httpd"
  "e2e-test-images/nginx:1.14-4 nginx"
  "e2e-test-images/nginx:1.15-4 nginx"
  "e2e-test-images/busybox:1.36.1-1 busybox"
  "e2e-test-images/agnhost:2.53 pause"
  "e2e-test-images/redis:5.0.5-3 pause"
  "library/nginx:alpine nginx"
  "library/nginx:latest nginx"
  "library/busybox:latest busybox"
  "library/nginx:1.15.1 nginx"
  "library/centos:7 pause"
  "openkruise/minecraft-demo:probe-v0 probe"
)
# <repository>:<tag> served with the manifest of another: same digest, same image ID.
aliases=(
  "library/nginx:mainline-alpine library/nginx:alpine"
)
# The registries whose pulls go to the local one.
mirrored=(registry.k8s.io docker.io)

stamp=$({ cat "${BASH_SOURCE[0]}"; sha256sum /usr/bin/busybox; } | sha256sum | cut -c1-12)
cache=$cache_root/e2e-images-$stamp
buildah_() { buildah --storage-driver vfs --root "$node/buildah/root" --runroot "$node/buildah/run" "$@"; }

accept=(-H 'Accept: application/vnd.oci.image.manifest.v1+json'
  -H 'Accept: application/vnd.docker.distribution.manifest.v2+json')
has_image() { # repo tag
  curl -sf -o /dev/null "${accept[@]}" "http://$registry/v2/$1/manifests/$2"
}

build() { # repo tag kind archive
  local ctx=$node/buildah/e2e-ctx-$3 cmd docroot
  rm -rf "$ctx"
  mkdir -p "$ctx/bin" "$ctx/root/tmp"
  cp /usr/bin/busybox "$ctx/bin/busybox"
  for applet in $(/usr/bin/busybox --list); do
    [ "$applet" = busybox ] || ln -sf busybox "$ctx/bin/$applet"
  done
  # /bin/bash, which the Debian-based real images have and specs call (ContainerPriority's
  # `/bin/bash -c "read -p wait"` in httpd): busybox's sh, which has no `bash` applet name.
  printf '#!/bin/sh\nexec /bin/sh "$@"\n' >"$ctx/bin/bash"
  chmod 755 "$ctx/bin/bash"
  case $3 in
    httpd | nginx)
      docroot=/usr/local/apache2/htdocs
      [ "$3" = nginx ] && docroot=/usr/share/nginx/html
      mkdir -p "$ctx/root$docroot"
      echo "<html><body><h1>It works!</h1></body></html>" >"$ctx/root$docroot/index.html"
      cmd="[\"sh\", \"-c\", \"trap 'exit 0' TERM; httpd -f -p 80 -h $docroot & wait\"]"
      ;;
    busybox) cmd='["sh"]' ;;
    pause) cmd="[\"sh\", \"-c\", \"trap 'exit 0' TERM; sleep 2147483647 & wait\"]" ;;
    probe)
      cat >"$ctx/root/probe.sh" <<'PROBE'
#!/bin/sh
# The stand-in's probe: fails once, then says "data" once, then "gate".
n=$(($(cat /tmp/probe-calls 2>/dev/null || echo 0) + 1))
echo "$n" >/tmp/probe-calls
case $n in
  1) echo "starting"; exit 1 ;;
  2) echo "data" ;;
  *) echo "gate" ;;
esac
PROBE
      chmod 755 "$ctx/root/probe.sh"
      cmd="[\"sh\", \"-c\", \"trap 'exit 0' TERM; sleep 2147483647 & wait\"]"
      ;;
    *) log "unknown kind $3"; exit 1 ;;
  esac
  cat >"$ctx/Containerfile" <<EOF
FROM scratch
COPY bin /bin
COPY root /
ENV PATH=/bin
WORKDIR /
LABEL org.opencontainers.image.ref.name="$1:$2" io.kruise-rs.stand-in="busybox $3"
CMD $cmd
EOF
  buildah_ bud --quiet --isolation chroot -f "$ctx/Containerfile" -t "localhost/$1:$2" "$ctx" >/dev/null
  rm -f "$4.tmp"
  buildah_ push --quiet "localhost/$1:$2" "oci-archive:$4.tmp"
  mv "$4.tmp" "$4"
}

mkdir -p "$cache"
# The registry keeps what an earlier version of this script pushed: push again when the
# stamp it was pushed with differs (the images changed).
pushed_stamp=$node/stand-in-images.stamp
fresh=false
[ "$(cat "$pushed_stamp" 2>/dev/null)" = "$stamp" ] && fresh=true
for entry in "${images[@]}"; do
  read -r ref kind <<<"$entry"
  repo=${ref%%:*} tag=${ref#*:}
  $fresh && has_image "$repo" "$tag" && continue
  archive=$cache/$(echo "$repo" | tr / _)_$tag.tar
  if [ ! -f "$archive" ]; then
    log "building the stand-in for $ref ($kind)"
    build "$repo" "$tag" "$kind" "$archive"
  fi
  id=$(buildah_ pull --quiet "oci-archive:$archive" | tail -n 1)
  buildah_ push --quiet --tls-verify=false "$id" "docker://$registry/$repo:$tag"
  log "pushed $registry/$repo:$tag"
done
for entry in "${aliases[@]}"; do
  read -r ref of <<<"$entry"
  repo=${ref%%:*} tag=${ref#*:}
  $fresh && has_image "$repo" "$tag" && continue
  manifest=$(mktemp)
  type=$(curl -sf "${accept[@]}" -D - -o "$manifest" "http://$registry/v2/${of%%:*}/manifests/${of#*:}" |
    tr -d '\r' | sed -n 's/^[Cc]ontent-[Tt]ype: //p')
  curl -sf -X PUT -H "Content-Type: $type" --data-binary "@$manifest" "http://$registry/v2/$repo/manifests/$tag" >/dev/null
  rm -f "$manifest"
  log "pushed $registry/$ref (the manifest of $of)"
done
echo "$stamp" >"$pushed_stamp"

# containerd (1.6) reads certs.d at every pull: no restart.
for host in "${mirrored[@]}"; do
  dir=$node/containerd/certs.d/$host
  mkdir -p "$dir"
  cat >"$dir/hosts.toml.tmp" <<EOF
# Written by tests/conformance/stand-in-images.sh: pulls of $host come from the local registry.
server = "https://$host"
[host."http://$registry"]
  capabilities = ["pull", "resolve"]
  skip_verify = true
EOF
  mv "$dir/hosts.toml.tmp" "$dir/hosts.toml"
done
log "${mirrored[*]} mirrored to $registry on real-0"
