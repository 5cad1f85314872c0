#!/usr/bin/env bash
# `make images`: one OCI image per controller binary, FROM scratch, without pulling anything.
#
#   tests/images.sh             a static release build of every binary of
#                               tests/cluster/controllers.txt and daemon-agent (RUSTFLAGS="-C
#                               target-feature=+crt-static", --target <host>), then
#                               kruise-rs/<binary>:<version> from deploy/docker/Dockerfile.prebuilt
#                               (scratch, the binary, user 65532, org.opencontainers.image.*
#                               labels) with a Docker engine when one answers, else buildah
#                               (Debian's; vfs storage under .local/images/buildah); prints
#                               each binary's and image's size
#   tests/images.sh --local     the static release build alone, and a check that each
#                               binary is static (runs from `scratch`)
#   tests/images.sh --push R    builds as above, then pushes to the plain-http registry R
#                               (`make deploy-local`: the real node's, 127.0.0.1:15000) as
#                               R/kruise-rs/<binary>:<version>
#
# IMAGE_REPO (default kruise-rs) and IMAGE_TAG (default the workspace version) name the
# images; BINS="a-ctl b-ctl" picks binaries; NO_BUILD=1 pushes what was built before;
# ENGINE=docker|buildah picks the builder
# (DOCKER=podman for a docker-compatible CLI). The image build inside a container
# (deploy/docker/Dockerfile: the same build in the rust image, pulled) is for machines with
# a registry: docker build -f deploy/docker/Dockerfile --build-arg BIN=<binary> .
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
state=${KRUISE_LOCAL_DIR:-$root/.local}
version=$(sed -n '/^\[workspace.package\]/,/^\[/s/^version *= *"\(.*\)"/\1/p' Cargo.toml)
repo=${IMAGE_REPO:-kruise-rs}
tag=${IMAGE_TAG:-$version}
docker=${DOCKER:-docker}
# The controllers, and the node agent (a DaemonSet, not started by make up).
read -r -a bins <<<"${BINS:-$(grep -v '^#' tests/cluster/controllers.txt | tr '\n' ' ') daemon-agent}"
host=$(rustc -vV | sed -n 's/^host: //p')
out=${CARGO_TARGET_DIR:-$root/target}/$host/release
revision=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)

log() { echo "images: $*" >&2; }

static_build() {
  log "static release build of ${bins[*]} ($host, +crt-static)"
  local start=$SECONDS
  # nice: a release build takes both cores for minutes; --target keeps the flag off build
  # scripts and proc macros (which cannot be static).
  RUSTFLAGS="${RUSTFLAGS:-} -C target-feature=+crt-static" nice -n "${NICE:-10}" \
    cargo build --release --locked --quiet --target "$host" $(printf -- '--bin %s ' "${bins[@]}")
  log "built in $((SECONDS - start))s"
  for b in "${bins[@]}"; do
    if ! ldd "$out/$b" 2>&1 | grep -q -e 'statically linked' -e 'not a dynamic executable'; then
      log "$out/$b is not static: $(ldd "$out/$b" 2>&1 | tr '\n' ' ')"
      exit 1
    fi
  done
}

# buildah stores everything under .local; what containers-image and buildah still put in
# fixed host paths (a blob-info cache, a CNI lock) is removed again when it was absent.
host_paths=(/var/lib/containers /etc/cni /run/containers)
absent=()
remember_host() { for p in "${host_paths[@]}"; do [ -e "$p" ] || absent+=("$p"); done; }
restore_host() { for p in ${absent[@]+"${absent[@]}"}; do rm -rf "$p"; done; }

buildah_() { buildah --storage-driver vfs --root "$state/images/buildah/root" --runroot "$state/images/buildah/run" "$@"; }

pick_engine() {
  case ${ENGINE:-} in
    docker | buildah) echo "$ENGINE"; return ;;
  esac
  if command -v "$docker" >/dev/null 2>&1 && "$docker" info >/dev/null 2>&1; then
    echo docker
  elif command -v buildah >/dev/null 2>&1; then
    echo buildah
  else
    log "no image builder: neither a Docker engine ($docker info fails) nor buildah (tests/deps.sh --real-node installs it)"
    log "tests/images.sh --local runs the static build alone"
    exit 1
  fi
}

build_images() {
  local engine=$1
  printf '%-20s %12s %12s  %s\n' binary "binary size" "image size" image >&2
  for b in "${bins[@]}"; do
    local ctx=$state/images/ctx/$b
    rm -rf "$ctx"
    mkdir -p "$ctx/bin"
    cp "$out/$b" "$ctx/bin/$b"
    ln -s "$b" "$ctx/bin/controller"
    local args=(-f deploy/docker/Dockerfile.prebuilt --build-arg "BIN=$b" --build-arg "VERSION=$version"
      --build-arg "REVISION=$revision" -t "$repo/$b:$tag" "$ctx")
    local size
    if [ "$engine" = docker ]; then
      DOCKER_BUILDKIT=1 "$docker" build --quiet "${args[@]}" >/dev/null
      size=$("$docker" image inspect --format '{{.Size}}' "$repo/$b:$tag")
    else
      buildah_ bud --quiet --isolation chroot "${args[@]}" >/dev/null
      size=$(buildah_ images --noheading --format '{{.Size}}' "localhost/$repo/$b:$tag")
    fi
    printf '%-20s %8s KiB %12s  %s\n' "$b" "$(($(stat -c %s "$out/$b") / 1024))" "$size" "$repo/$b:$tag" >&2
  done
}

push_images() {
  local engine=$1 registry=$2
  for b in "${bins[@]}"; do
    local dest=$registry/$repo/$b:$tag
    if [ "$engine" = docker ]; then
      "$docker" tag "$repo/$b:$tag" "$dest"
      "$docker" push --quiet "$dest" >/dev/null
    else
      buildah_ push --quiet --tls-verify=false "localhost/$repo/$b:$tag" "docker://$dest"
    fi
    log "pushed $dest"
  done
}

case "${1:-}" in
  --local)
    static_build
    for b in "${bins[@]}"; do printf '%-20s %7s KiB  static\n' "$b" "$(($(stat -c %s "$out/$b") / 1024))"; done
    ;;
  "" | --push)
    [ "${1:-}" != --push ] || [ -n "${2:-}" ] || { log "usage: $0 --push <registry host:port>"; exit 2; }
    engine=$(pick_engine)
    remember_host
    trap restore_host EXIT
    if [ "${NO_BUILD:-0}" = 1 ]; then
      log "NO_BUILD=1: pushing the images built before"
    else
      static_build
      log "building ${#bins[@]} images with $engine"
      build_images "$engine"
    fi
    [ "${1:-}" != --push ] || push_images "$engine" "$2"
    ;;
  *)
    echo "usage: $0 [--local | --push <registry>]" >&2
    exit 2
    ;;
esac
