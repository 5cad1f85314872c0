#!/usr/bin/env bash
# make fuzz [FUZZ_SECONDS=60] [FUZZ_TARGET=name] [FUZZ_JOBS=1]: every fuzz target (or one) for
# FUZZ_SECONDS each, then a table target -> executions, result; also
# target/fuzz/summary.json. Nightly + cargo-fuzz (installed if missing). Exit 1 if any
# target crashed, timed out or ran out of memory (the input is in fuzz/artifacts/<target>/).
set -uo pipefail
cd "$(dirname "$0")/.."
SECONDS_EACH=${FUZZ_SECONDS:-60}
ONLY=${FUZZ_TARGET:-}
TIMEOUT=${FUZZ_TIMEOUT:-10}      # seconds one input may take
RSS_MB=${FUZZ_RSS_MB:-2048}

command -v rustup >/dev/null || { echo "fuzz: rustup is needed (nightly toolchain)"; exit 1; }
rustup toolchain list | grep -q '^nightly' || rustup toolchain install nightly --profile minimal
command -v cargo-fuzz >/dev/null || cargo install cargo-fuzz --locked

# No sanitizer: the workspace forbids unsafe code, so what we look for is panics,
# timeouts and memory blow-ups; ASan would only slow every execution down.
FUZZ=(cargo +nightly fuzz)
FLAGS=(--sanitizer none --fuzz-dir fuzz)
"${FUZZ[@]}" build "${FLAGS[@]}" ${ONLY:+"$ONLY"} || exit 1
mapfile -t TARGETS < <(if [ -n "$ONLY" ]; then echo "$ONLY"; else "${FUZZ[@]}" list --fuzz-dir fuzz; fi)

OUT=target/fuzz
JOBS=${FUZZ_JOBS:-1}             # targets fuzzed at the same time
rm -rf "$OUT/results"
mkdir -p "$OUT/logs" "$OUT/results"

# One target: its log, and a result line "<executions> <result> <artifact>".
run_one() {
  local t=$1 log="$OUT/logs/$1.log" rc execs result artifact
  mkdir -p "fuzz/target/corpus/$t" "fuzz/artifacts/$t"
  # The first corpus dir receives new inputs; the committed seeds stay as they are.
  "${FUZZ[@]}" run "${FLAGS[@]}" "$t" "fuzz/target/corpus/$t" "fuzz/corpus/$t" -- \
    -max_total_time="$SECONDS_EACH" -timeout="$TIMEOUT" -rss_limit_mb="$RSS_MB" \
    -print_final_stats=1 >"$log" 2>&1
  rc=$?
  execs=$(grep -oP 'stat::number_of_executed_units:\s*\K[0-9]+' "$log" | tail -1)
  [ -n "$execs" ] || execs=$(grep -oP '^#\K[0-9]+(?=\s)' "$log" | tail -1)
  if [ $rc -eq 0 ]; then result=ok
  elif grep -q 'libFuzzer: timeout' "$log"; then result=timeout
  elif grep -q 'out-of-memory\|malloc limit' "$log"; then result=oom
  elif grep -q 'panicked at\|deadly signal\|stack-overflow' "$log"; then result=crash
  else result="error-rc-$rc"; fi
  artifact=$(grep -oP 'Test unit written to \K\S+' "$log" | tail -1)
  echo "${execs:-0} $result ${artifact:-}" >"$OUT/results/$t"
  printf '%-22s %12s  %s %s\n' "$t" "${execs:-0}" "$result" "${artifact:-}"
}

for t in "${TARGETS[@]}"; do
  while [ "$(jobs -rp | wc -l)" -ge "$JOBS" ]; do wait -n; done
  run_one "$t" &
done
wait

failed=0
rows=()
echo
printf '%-22s %12s  %s\n' target executions result
for t in "${TARGETS[@]}"; do
  read -r execs result artifact <"$OUT/results/$t"
  [ "$result" = ok ] || failed=1
  printf '%-22s %12s  %s %s\n' "$t" "$execs" "$result" "${artifact:-}"
  rows+=("{\"target\":\"$t\",\"seconds\":$SECONDS_EACH,\"executions\":$execs,\"result\":\"$result\",\"artifact\":\"${artifact:-}\"}")
done
(IFS=,; echo "[${rows[*]}]") > "$OUT/summary.json"
echo "summary: $OUT/summary.json, logs: $OUT/logs/"
exit $failed
