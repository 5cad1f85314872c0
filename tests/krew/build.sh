#!/usr/bin/env bash
# `make krew`: the kubectl-kruise release archive and its krew plugin manifest.
#
#   tests/krew/build.sh    a static release build of kubectl-kruise (RUSTFLAGS="-C
#                          target-feature=+crt-static", --target <host>, as tests/images.sh
#                          builds the controllers), packed with LICENSE into
#                          target/krew/kubectl-kruise-linux-amd64.tar.gz, reproducibly
#                          (entries sorted, mtime the last commit changing its inputs, owner
#                          0:0, gzip without a name or time), and deploy/krew/kruise.yaml (a
#                          krew Plugin named kruise, as kruise-tools' .krew.yaml) with that
#                          archive's sha256
#
# RELEASE_URL is the address the archive will be published at (default: the repository's
# GitHub release v<version>); krew downloads it from there, or takes a local copy with
# `kubectl krew install --manifest=deploy/krew/kruise.yaml --archive=<tar.gz>`. Prints the
# archive's path on stdout (last line); progress goes to stderr.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$root"
version=$(sed -n '/^\[workspace.package\]/,/^\[/s/^version *= *"\(.*\)"/\1/p' Cargo.toml)
repository=$(sed -n '/^\[workspace.package\]/,/^\[/s/^repository *= *"\(.*\)"/\1/p' Cargo.toml)
host=$(rustc -vV | sed -n 's/^host: //p')
platform=linux-amd64
if [ "$host" != x86_64-unknown-linux-gnu ]; then
  echo "krew: the manifest lists linux/amd64 only; this host builds $host" >&2
  exit 1
fi
target_dir=${CARGO_TARGET_DIR:-$root/target}
bin=$target_dir/$host/release/kubectl-kruise
out=$target_dir/krew
archive=$out/kubectl-kruise-$platform.tar.gz
url=${RELEASE_URL:-$repository/releases/download/v$version/kubectl-kruise-$platform.tar.gz}
# The time of the last commit that changed what goes into the archive: the same sources
# pack to the same bytes on any machine, any day, and a commit elsewhere in the tree (the
# manifest's own, too) leaves the archive and the manifest's sha256 as they were.
inputs=(crates/kubectl-kruise Cargo.toml Cargo.lock LICENSE tests/krew/build.sh)
epoch=${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct -- "${inputs[@]}" 2>/dev/null || echo 0)}

log() { echo "krew: $*" >&2; }

log "static release build of kubectl-kruise ($host, +crt-static)"
start=$SECONDS
# --target keeps +crt-static off build scripts and proc macros (which cannot be static);
# the path remaps keep this checkout's and cargo's home paths out of the binary's panic
# messages, so another checkout builds the same bytes.
RUSTFLAGS="${RUSTFLAGS:-} -C target-feature=+crt-static --remap-path-prefix=$root=. \
--remap-path-prefix=${CARGO_HOME:-$HOME/.cargo}=/cargo" nice -n "${NICE:-10}" \
  cargo build --release --locked --quiet --target "$host" -p kubectl-kruise --bin kubectl-kruise
log "built in $((SECONDS - start))s"
if ! ldd "$bin" 2>&1 | grep -q -e 'statically linked' -e 'not a dynamic executable'; then
  log "$bin is not static: $(ldd "$bin" 2>&1 | tr '\n' ' ')"
  exit 1
fi

# One directory in the archive, as kruise-tools' archives (its manifest takes
# "*/kubectl-kruise" and "*/LICENSE").
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
mkdir "$stage/$platform"
install -m 0755 "$bin" "$stage/$platform/kubectl-kruise"
install -m 0644 LICENSE "$stage/$platform/LICENSE"
touch -h -d "@$epoch" "$stage/$platform" "$stage/$platform"/*
chmod 0755 "$stage/$platform"
mkdir -p "$out"
tar --sort=name --mtime="@$epoch" --owner=0 --group=0 --numeric-owner --format=gnu \
  -C "$stage" -cf - "$platform" | gzip -n -9 >"$archive.tmp"
mv "$archive.tmp" "$archive"
sha=$(sha256sum "$archive" | cut -d' ' -f1)

mkdir -p deploy/krew
cat >deploy/krew/kruise.yaml <<YAML
# Written by tests/krew/build.sh (make krew) from the archive it packs: do not edit; the
# sha256 is that of target/krew/kubectl-kruise-$platform.tar.gz packed by it.
apiVersion: krew.googlecontainertools.github.com/v1alpha2
kind: Plugin
metadata:
  name: kruise
spec:
  version: v$version
  homepage: $repository
  shortDescription: Manage OpenKruise workloads (kruise-rs)
  description: |
    kubectl kruise drives OpenKruise workloads: the rollouts of CloneSet, Advanced
    StatefulSet, Advanced DaemonSet and UnitedDeployment (status, history, undo, pause,
    resume, restart), image, env and resource changes, scaling with chosen Pods, in-place
    container restarts and BroadcastJobs, with the commands and flags of
    openkruise/kruise-tools. Built by the kruise-rs project (OpenKruise in Rust).
  platforms:
  - selector:
      matchLabels:
        os: linux
        arch: amd64
    uri: $url
    sha256: $sha
    files:
    - from: "*/kubectl-kruise"
      to: "."
    - from: "*/LICENSE"
      to: "."
    bin: kubectl-kruise
YAML
log "$archive: $(stat -c %s "$archive") bytes (binary $(stat -c %s "$bin") bytes), sha256 $sha"
log "deploy/krew/kruise.yaml written"
echo "$archive"
