#!/usr/bin/env bash
# Instructions per operation (callgrind, exact for one build) of the static fast paths and
# of the adaptive bulkhead's acquire + release, for benches/results/adaptive.md.
#
#   benches/adaptive_cost.sh [N] [OP...]   (default N 200000; default ops below)
#
# Every figure is (run with N - run with 0) / N, so the set-up cancels out. Built with the
# feature `tsc` (ADAPTIVE_FEATURES="" for the std clock).
set -euo pipefail
cd "$(dirname "$0")/.."
N="${1:-200000}"
shift || true
OPS=("$@")
if [ ${#OPS[@]} -eq 0 ]; then
    OPS=(bulkhead_reject bulkhead_acq_rel bulkhead_acq_rel_owned bulkhead_call bulkhead_zero_wait
        floor_instant_now adaptive_reject adaptive_acq_rel adaptive_acq_rel_aimd adaptive_acq_rel_vegas adaptive_acq_rel_1in8 adaptive_acq_rel_1in16 adaptive_call)
fi
WORK="${CARGO_TARGET_DIR:-target}/adaptive_cost"
mkdir -p "$WORK"
cargo bench --no-run --features "${ADAPTIVE_FEATURES-tsc}" --bench callgrind 2>/dev/null
CALLGRIND="$(cargo bench --no-run --features "${ADAPTIVE_FEATURES-tsc}" --bench callgrind --message-format=json 2>/dev/null |
    python3 benches/report.py executable callgrind)"
EXE="$CALLGRIND"
source benches/valgrind.sh
echo "| op | instructions per op |"
echo "|---|---:|"
for op in "${OPS[@]}"; do
    if ! "$CALLGRIND" list | awk -F'\t' '{print $1}' | grep -qx "$op"; then continue; fi
    base=$(instructions "$op" 0)
    total=$(instructions "$op" "$N")
    what=$("$CALLGRIND" list | awk -F'\t' -v op="$op" '$1 == op { print $2 }')
    echo "| $what (\`$op\`) | $(per "$base" "$total" "$N") |"
done
