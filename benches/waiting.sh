#!/usr/bin/env bash
# The waiting path, measured exactly: instructions (callgrind) and heap blocks (DHAT) per
# waiting round, ours next to tokio's and the floor, plus the zero-wait async rejection and
# the size of the futures a waiting caller holds. Writes benches/results/waiting.md.
#
#   benches/waiting.sh [ROUNDS]      (default 2000; about 3 minutes; needs valgrind)
#
# A round: two tasks on a current-thread tokio runtime share one permit and hold it across
# a `yield_now`, so each queues once and is handed the permit once (benches/callgrind.rs).
# Every figure is (run with ROUNDS - run with 0) / ROUNDS, so the set-up cancels out.
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS="${1:-2000}"
OUT=benches/results/waiting.md
WORK="${CARGO_TARGET_DIR:-target}/waiting"
mkdir -p "$WORK" benches/results

cargo bench --no-run --bench callgrind --bench probe
exe() {
    cargo bench --no-run --bench "$1" --message-format=json 2>/dev/null |
        python3 benches/report.py executable "$1"
}
CALLGRIND="$(exe callgrind)"
PROBE="$(exe probe)"

EXE="$CALLGRIND"
source benches/valgrind.sh

{
    echo "# The waiting path"
    echo
    echo "Written by \`benches/waiting.sh $ROUNDS\` at commit \`$(git rev-parse --short HEAD)\`"
    echo "($(rustc -V)). Instruction and allocation counts are exact for this build, whatever"
    echo "the machine's load."
    echo
    echo "| per round (2 queued waits, 2 hand-offs) | instructions | heap blocks |"
    echo "|---|---:|---:|"
    for op in round_bulkhead_unbounded round_tokio_unbounded round_bulkhead_bounded \
        round_tokio_bounded round_floor; do
        i=$(per "$(instructions $op 0)" "$(instructions $op "$ROUNDS")" "$ROUNDS")
        b=$(per "$(blocks $op 0)" "$(blocks $op "$ROUNDS")" "$ROUNDS")
        what=$("$CALLGRIND" list | awk -F'\t' -v op="$op" '$1 == op { print $2 }')
        echo "| $what | $i | $b |"
    done
    echo
    echo "| per operation | instructions |"
    echo "|---|---:|"
    for op in bulkhead_zero_wait bulkhead_zero_wait_async tokio_timeout_zero; do
        n=$("$CALLGRIND" list | awk -F'\t' -v op="$op" '$1 == op { print $3 }')
        what=$("$CALLGRIND" list | awk -F'\t' -v op="$op" '$1 == op { print $2 }')
        echo "| $what | $(per "$(instructions $op 0)" "$(instructions $op "$n")" "$n") |"
    done
    echo
    echo "| future (\`size_of\`) | bytes |"
    echo "|---|---:|"
    "$PROBE" sizes | python3 -c 'import json,sys
for row in json.load(sys.stdin): print("| %s | %d |" % (row["what"], row["bytes"]))'
    echo
    echo "Deadline overshoot (\`probe deadline\`, wall clock, so it varies with the machine's load):"
    echo "time from the call to its \`WaitTimedOut\` return, minus the max wait, in microseconds."
    echo
    echo "| max wait | how | samples | p50 µs | p99 µs | max µs | early |"
    echo "|---:|---|---:|---:|---:|---:|---:|"
    "$PROBE" deadline | python3 -c 'import json,sys
for r in json.load(sys.stdin): print("| %d µs | %s | %d | %.1f | %.1f | %.1f | %d |" % (r["wait_us"], r["how"], r["samples"], r["median_us"], r["p99_us"], r["max_us"], r["early"]))'
} >"$OUT"
echo "== wrote $OUT" >&2
