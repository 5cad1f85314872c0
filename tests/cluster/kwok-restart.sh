#!/usr/bin/env bash
# Restarts only kwok of the running local cluster (to reload kwok-stages.yaml), with the
# arguments it runs with now; etcd, the apiserver and the rest keep running, and so do
# the fake nodes (kwok picks them up again by their annotation). Pods on them move again
# once the old instance's node leases expire (--node-lease-duration-seconds, 40 s).
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
state=${KRUISE_LOCAL_DIR:-$root/.local}
pidfile=$state/run/kwok.pid
pid=$(cat "$pidfile")
mapfile -d '' args <"/proc/$pid/cmdline"
kill "$pid"
for _ in $(seq 1 40); do kill -0 "$pid" 2>/dev/null || break; sleep 0.25; done
kill -9 "$pid" 2>/dev/null || true
setsid "${args[@]}" >>"$state/logs/kwok.log" 2>&1 </dev/null &
echo $! >"$pidfile"
echo "kwok restarted (pid $!)" >&2
