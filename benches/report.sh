#!/usr/bin/env bash
# Runs the benchmark suite in quick mode and writes benches/results/latest.md (tables, target
# verdicts), latest.svg (chart of the rejection and acquire + release groups) and latest.json
# (every raw number).
#
#   benches/report.sh [RUNS]     RUNS criterion runs of the whole suite (default 2)
#
# Needs python3 and valgrind. About 5 minutes on 2 cores. Honours CARGO_TARGET_DIR.
# Environment knobs: QUICK (criterion flags), BENCH_FEATURES (cargo features for every bench
# build; default `metrics tsc`: the instrumented rows export through the metrics facade, and
# adaptive limits time samples with the TSC (feature `tsc`);
# add `tracing` to measure a tracing-enabled build).
set -euo pipefail
cd "$(dirname "$0")/.."

RUNS="${1:-2}"
QUICK="${QUICK:---warm-up-time 0.5 --measurement-time 1 --sample-size 20 --noplot}"
TARGET="${CARGO_TARGET_DIR:-target}"
WORK="$TARGET/bench-report"
RESULTS=benches/results
REPORT="python3 benches/report.py"
TIMED=(--bench acquire --bench contention --bench handoff)
FEATURES=(--features "${BENCH_FEATURES:-metrics tsc}")

rm -rf "$WORK"
mkdir -p "$WORK" "$RESULTS"

echo "== building" >&2
cargo bench --no-run "${FEATURES[@]}" "${TIMED[@]}" --bench callgrind --bench probe
exe() {
    cargo bench --no-run "${FEATURES[@]}" --bench "$1" --message-format=json 2>/dev/null |
        $REPORT executable "$1"
}
CALLGRIND_BIN="$(exe callgrind)"
PROBE_BIN="$(exe probe)"

commit="$(git rev-parse --short HEAD)"
if ! git diff --quiet HEAD -- src Cargo.toml benches 2>/dev/null; then
    commit="$commit + uncommitted changes"
fi
python3 - "$WORK/machine.json" "$QUICK" "$commit" <<'EOF'
import json, subprocess, sys, datetime
lscpu = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
field = lambda name: next((l.split(":", 1)[1].strip() for l in lscpu.splitlines()
                           if l.startswith(name + ":")), "?")
virt = field("Hypervisor vendor")
json.dump({
    "cpu": field("Model name"),
    "cores": field("CPU(s)"),
    "virt": "virtual machine, " + virt if virt != "?" else "bare metal",
    "rustc": subprocess.run(["rustc", "-V"], capture_output=True, text=True).stdout.strip(),
    "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
    "criterion_args": sys.argv[2],
    "commit": sys.argv[3],
}, open(sys.argv[1], "w"), indent=1)
EOF

for run in $(seq 1 "$RUNS"); do
    echo "== criterion run $run of $RUNS" >&2
    export CRITERION_HOME="$WORK/criterion-$run"
    # shellcheck disable=SC2086 # QUICK is a list of flags
    BULKHEAD_BENCH_MIX="$WORK/mix-$run.json" \
        timeout 900 cargo bench "${FEATURES[@]}" "${TIMED[@]}" -- $QUICK >"$WORK/criterion-$run.log" 2>&1 ||
        { tail -n 30 "$WORK/criterion-$run.log" >&2; exit 1; }
    $REPORT collect "$CRITERION_HOME" >"$WORK/run-$run.json"
done
unset CRITERION_HOME

echo "== allocations and deadline precision" >&2
"$PROBE_BIN" allocs >"$WORK/allocs.json"
"$PROBE_BIN" deadline >"$WORK/deadline.json"

echo "== callgrind" >&2
{
    echo "{\"ops\": {"
    first=1
    while IFS=$'\t' read -r op what ops; do
        for n in 0 "$ops"; do
            # Without the sample clock's calibration (see benches/valgrind.sh).
            valgrind --tool=callgrind --toggle-collect='quanta::Clock::new' --collect-atstart=yes \
                --callgrind-out-file="$WORK/callgrind.$op.$n.out" \
                "$CALLGRIND_BIN" "$op" "$n" >/dev/null 2>"$WORK/callgrind.$op.$n.log"
        done
        base="$($REPORT callgrind "$WORK/callgrind.$op.0.out")"
        total="$($REPORT callgrind "$WORK/callgrind.$op.$ops.out")"
        [ "$first" = 1 ] || echo ","
        first=0
        echo "\"$op\": {\"what\": \"$what\", \"n\": $ops, \"base\": $base, \"total\": $total,"
        echo " \"per_op\": $(python3 -c "print(($total - $base) / $ops)")}"
    done < <("$CALLGRIND_BIN" list)
    echo "}}"
} >"$WORK/callgrind.json"

$REPORT render "$WORK" "$RESULTS"
echo "== wrote $RESULTS/latest.md, latest.svg, latest.json" >&2
