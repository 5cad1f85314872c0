# Sourced by cluster.sh, node.sh and ../test.sh: KRUISE_K8S_VERSION picks the Kubernetes
# minor version of the local cluster (control plane, kubectl, the real node's kubelet).
#   1.33 (default)    tools/ (k8s.io/kubernetes v1.33.x), built by build.sh
#   1.32, 1.34, 1.37  k8s-<version>/tools/ (pin-version.sh writes them), built by
#                     k8s-<version>/build.sh, a symlink to build.sh: each version has its
#                     own pins and so its own cache directory.
# Sets k8s_dir: the directory whose build.sh and build-node.sh build that version, and
# k8s_minor: the minor version as a number (cluster.sh's flags differ from 1.37 on).
k8s_version=${KRUISE_K8S_VERSION:-1.33}
k8s_minor=${k8s_version#*.}
k8s_dir=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
if [ "$k8s_version" != 1.33 ]; then
  k8s_dir=$k8s_dir/k8s-$k8s_version
  if [ ! -f "$k8s_dir/tools/go.mod" ]; then
    echo "KRUISE_K8S_VERSION=$k8s_version: no tests/cluster/k8s-$k8s_version/ (supported: 1.32, 1.33, 1.34, 1.37;" \
      "tests/cluster/pin-version.sh v1.MINOR.PATCH pins another)" >&2
    exit 2
  fi
fi
