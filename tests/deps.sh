#!/usr/bin/env bash
# Makes sure the tools the build and tests need are present; installs what is missing.
# Idempotent and quiet when everything is there.
set -euo pipefail

need() { command -v "$1" >/dev/null 2>&1; }

if ! need cargo; then
  echo "deps: Rust (cargo) is required: https://rustup.rs" >&2
  exit 1
fi
if need rustup; then
  for component in rustfmt clippy; do
    rustup component list --installed 2>/dev/null | grep -q "^$component" || rustup component add "$component"
  done
fi
if ! need go; then
  echo "deps: Go is required to build the local control plane (tests/cluster)" >&2
  exit 1
fi
missing=()
# (Prometheus, which the deploy e2e tests scrape the controllers with, is built from its Go
# module by tests/cluster/build-prometheus.sh: Debian's lacks kubernetes_sd.)
for tool in openssl curl setsid; do need "$tool" || missing+=("$tool"); done
if [ ${#missing[@]} -gt 0 ]; then
  echo "deps: installing ${missing[*]}" >&2
  pkgs=()
  for t in "${missing[@]}"; do
    case $t in setsid) pkgs+=(util-linux) ;; *) pkgs+=("$t") ;; esac
  done
  sudo_cmd=""
  [ "$(id -u)" -eq 0 ] || sudo_cmd=sudo
  $sudo_cmd apt-get update -qq &&
    $sudo_cmd env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${pkgs[@]}"
fi

# --real-node (make up-real, make deploy-local): the real node's runtime and
# registry, and the image builder, from Debian: containerd + runc, the CNI plugins
# (bridge, host-local, loopback), docker-registry (distribution 2.8), buildah (FROM scratch
# builds, pushes; pulls in iptables), nftables, busybox-static (the test images). None is started by
# the package (policy-rc.d); tests/cluster/node.sh starts each under .local/. --images
# (make images without a Docker engine): buildah alone.
if [ "${1:-}" = "--real-node" ] || [ "${1:-}" = "--images" ]; then
  pkgs=()
  need buildah || pkgs+=(buildah)
fi
if [ "${1:-}" = "--real-node" ]; then
  need containerd || pkgs+=(containerd)
  need runc || pkgs+=(runc)
  [ -x /usr/lib/cni/bridge ] || pkgs+=(containernetworking-plugins)
  need docker-registry || pkgs+=(docker-registry)
  # htpasswd: the login of the node's second registry (pulls with a pull secret).
  need htpasswd || pkgs+=(apache2-utils)
  [ -x /usr/bin/busybox ] && /usr/bin/busybox --list >/dev/null 2>&1 && ! ldd /usr/bin/busybox >/dev/null 2>&1 ||
    pkgs+=(busybox-static)
  need iptables || pkgs+=(iptables)
  # nft: `down` deletes the nat table iptables-nft created for our chain, when it was absent.
  need nft || pkgs+=(nftables)
fi
if [ "${1:-}" = "--real-node" ] || [ "${1:-}" = "--images" ]; then
  if [ ${#pkgs[@]} -gt 0 ]; then
    echo "deps: installing ${pkgs[*]}" >&2
    sudo_cmd=""
    [ "$(id -u)" -eq 0 ] || sudo_cmd=sudo
    start=$SECONDS
    $sudo_cmd apt-get update -qq &&
      $sudo_cmd env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${pkgs[@]}" >/dev/null
    echo "deps: installed in $((SECONDS - start))s" >&2
  fi
fi
