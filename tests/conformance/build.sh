#!/usr/bin/env bash
# Builds OpenKruise v1.9.0's Ginkgo e2e suite (github.com/openkruise/kruise/test/e2e,
# from the Go module proxy) into one test binary with `go test -c`, for `make conformance`,
# and next to it conformance-report (./report: skip regex, table, filtered JUnit).
#
# The wrapper module next to this script (go.mod, go.sum, tools.go) pins the suite and
# copies upstream's replace directives; upstream's tests are built as published, never
# edited. The binary is cached under $KRUISE_CACHE (default ~/.cache/kruise-rs) in a
# directory named after a hash of the pins, like the control plane (tests/cluster/build.sh):
# a change of pins rebuilds the suite, a change of ./report rebuilds only the report tool
# (its hash is kept beside it), anything else is a no-op. About 2 minutes on a warm module
# cache, 10+ on a cold one on 2 busy cores.
#
# Prints the path of the test binary on stdout (last line); progress goes to stderr.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
cache=${KRUISE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/kruise-rs}
stamp=$(cat "$here/go.mod" "$here/go.sum" "$here/tools.go" | sha256sum | cut -c1-12)
report_stamp=$(cat "$here/go.mod" "$here/go.sum" "$here"/report/*.go | sha256sum | cut -c1-12)
dir="$cache/conformance-$stamp"
out="$dir/kruise-e2e.test"
report_fresh() { [ -x "$dir/conformance-report" ] && [ "$(cat "$dir/conformance-report.stamp" 2>/dev/null)" = "$report_stamp" ]; }

if [ -x "$out" ] && report_fresh; then
  echo "$out"
  exit 0
fi

command -v go >/dev/null || { echo "conformance/build.sh: Go is required to build the e2e suite" >&2; exit 1; }
mkdir -p "$dir"

# As tests/cluster/build.sh: go.sum is committed and verifies every module hash, so the
# checksum database (not reachable from every machine) adds nothing.
export GOSUMDB=off GOFLAGS=-mod=readonly CGO_ENABLED=0
export GOMODCACHE=${GOMODCACHE:-$(go env GOMODCACHE)}

if ! report_fresh; then
  (cd "$here" && go build -trimpath -ldflags "-s -w" -o "$dir/conformance-report.tmp" ./report)
  mv "$dir/conformance-report.tmp" "$dir/conformance-report"
  echo "$report_stamp" >"$dir/conformance-report.stamp"
fi
if [ ! -x "$out" ]; then
  echo "conformance/build.sh: building the OpenKruise e2e suite (github.com/openkruise/kruise/test/e2e)" >&2
  start=$SECONDS
  (cd "$here" && go test -c -trimpath -ldflags "-s -w" -o "$out.tmp" github.com/openkruise/kruise/test/e2e)
  mv "$out.tmp" "$out"
  echo "conformance/build.sh: built in $((SECONDS - start))s" >&2
fi
echo "$out"
