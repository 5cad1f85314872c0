#!/usr/bin/env bash
# `make images`: one container image per controller binary, from deploy/docker/Dockerfile.
#
#   tests/images.sh            build kruise-rs/<binary>:<version> for every binary of
#                              tests/cluster/controllers.txt (needs a Docker engine)
#   tests/images.sh --local    no engine needed: the release build the Dockerfile runs
#                              (cargo build --release --locked --bin <binary>), then each
#                              binary's size and the shared libraries it needs (the runtime
#                              image, distroless cc, has glibc and libgcc only)
#
# IMAGE_REPO (default kruise-rs) and IMAGE_TAG (default the workspace version) name the
# images; BINS="a-ctl b-ctl" picks binaries; DOCKER=podman uses podman. Point the
# kustomize overlays at them with `kustomize edit set image kruise-rs/<binary>=<image>`.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
version=$(sed -n '/^\[workspace.package\]/,/^\[/s/^version *= *"\(.*\)"/\1/p' Cargo.toml)
repo=${IMAGE_REPO:-kruise-rs}
tag=${IMAGE_TAG:-$version}
docker=${DOCKER:-docker}
read -r -a bins <<<"${BINS:-$(grep -v '^#' tests/cluster/controllers.txt | tr '\n' ' ')}"

local_build() {
  echo "images: release build of ${bins[*]}, as deploy/docker/Dockerfile does it"
  cargo build --release --locked $(printf -- '--bin %s ' "${bins[@]}")
  printf '%-20s %10s  %s\n' binary size "needs (besides the loader)"
  for b in "${bins[@]}"; do
    local f=target/release/$b
    local libs
    libs=$(ldd "$f" 2>/dev/null | awk '$1 !~ /^\/|linux-vdso/ {print $1}' | tr '\n' ' ')
    printf '%-20s %7s KiB  %s\n' "$b" "$(($(stat -c %s "$f") / 1024))" "$libs"
    # distroless/cc-debian12 ships glibc and libgcc_s: anything else would not start.
    for lib in $libs; do
      case $lib in libc.so.*|libm.so.*|libgcc_s.so.*|libpthread.so.*|libdl.so.*|librt.so.*) ;;
        *) echo "images: $b needs $lib, which the runtime image lacks" >&2; exit 1 ;;
      esac
    done
  done
}

if [ "${1:-}" = "--local" ]; then
  local_build
  exit 0
fi

if ! command -v "$docker" >/dev/null 2>&1 || ! err=$("$docker" info 2>&1 >/dev/null); then
  cat >&2 <<MSG
images: no container engine reachable (${docker}${err:+: $(echo "$err" | grep -m1 -i 'cannot\|error' || true)}).
images: nothing was built. With Docker (or DOCKER=podman) available, this builds:
MSG
  for b in "${bins[@]}"; do
    echo "  $docker build -f deploy/docker/Dockerfile --build-arg BIN=$b -t $repo/$b:$tag ." >&2
  done
  echo "images: 'tests/images.sh --local' runs the same release build without an engine." >&2
  exit 1
fi

revision=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
for b in "${bins[@]}"; do
  echo "images: building $repo/$b:$tag"
  DOCKER_BUILDKIT=1 "$docker" build -f deploy/docker/Dockerfile \
    --build-arg "BIN=$b" --build-arg "VERSION=$version" --build-arg "REVISION=$revision" \
    -t "$repo/$b:$tag" .
done
echo "images: built $(printf "$repo/%s:$tag " "${bins[@]}")"
