#!/usr/bin/env bash
# Regenerates the parity fixtures from upstream OpenKruise v1.9.0 (make parity-fixtures;
# not part of make test): the Go struct table the Rust Go-JSON writer uses
# (crates/kruise-workload/src/revision/gotypes.json) and what upstream computes for
# tests/parity/inputs.json (tests/parity/expected.json). Commit both; the Rust unit tests
# read them. Needs Go and the Go module proxy (or a warm module cache); the first build
# of the k8s.io/kubernetes packages takes several minutes.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
# go.sum is committed and verifies every module hash (as tests/bench/upstream/build.sh).
export GOSUMDB=off GOFLAGS=-mod=readonly
bin=$(mktemp -d)/parity
trap 'rm -rf "$(dirname "$bin")"' EXIT
(cd "$here" && nice -n 10 go build -o "$bin" .)
"$bin" table > "$root/crates/kruise-workload/src/revision/gotypes.json"
"$bin" fixtures < "$here/inputs.json" > "$here/expected.json"
echo "parity: wrote crates/kruise-workload/src/revision/gotypes.json and tests/parity/expected.json" >&2
