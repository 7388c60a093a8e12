#!/usr/bin/env bash
# What `#[bulkhead]` costs next to a hand-written `call` / `call_fallible`: instructions
# (callgrind) and heap blocks (DHAT) per call, exact for this build whatever the machine's
# load. Writes benches/results/macro.md.
#
#   benches/macro.sh [N]      (default 200000 calls per op; about 2 minutes; needs valgrind)
#
# Every figure is (run with N - run with 0) / N (benches/macro_cost.rs): the set-up, and the
# attribute's one registry look-up per call site on its first call, cancel out.
set -euo pipefail
cd "$(dirname "$0")/.."
N="${1:-200000}"
OUT=benches/results/macro.md
WORK="${CARGO_TARGET_DIR:-target}/macro"
mkdir -p "$WORK" benches/results

cargo bench --no-run --features macros --bench macro_cost
EXE="$(cargo bench --no-run --features macros --bench macro_cost --message-format=json 2>/dev/null |
    python3 benches/report.py executable macro_cost)"

source benches/valgrind.sh

{
    echo "# The \`#[bulkhead]\` attribute's cost"
    echo
    echo "Written by \`benches/macro.sh $N\` at commit \`$(git rev-parse --short HEAD)\`"
    echo "($(rustc -V)), bench profile. Per call: (count with $N calls − count with 0) / $N;"
    echo "every op makes one call before its loop, so the attribute's one registry look-up"
    echo "per call site is in both runs and cancels out. Instruction and allocation counts are"
    echo "exact for this build, whatever the machine's load."
    echo
    echo "| per call | instructions | heap blocks |"
    echo "|---|---:|---:|"
    while IFS=$'\t' read -r op what _; do
        i=$(per "$(instructions "$op" 0)" "$(instructions "$op" "$N")" "$N")
        b=$(per "$(blocks "$op" 0)" "$(blocks "$op" "$N")" "$N")
        echo "| ${what//|/\\|} | $i | $b |"
    done < <("$EXE" list)
    echo
    echo "Reading: the attribute's rows include its call-site check (one Acquire load of the"
    echo "\`OnceLock\`); a call site resolves to the registry's bulkhead, plain or with an adaptive"
    echo "limit attached (its permits then record samples through the bulkhead's own hook). The"
    echo "hand-written rows keep the bulkhead behind \`black_box\`, the attribute's is a"
    echo "\`&'static\`, so inlining differs."
    echo "No path allocates. The last row is what the once-per-site resolution saves: a registry"
    echo "look-up (a read lock, a map search, an \`Arc\` clone and drop) on every call."
} >"$OUT"
echo "== wrote $OUT" >&2
cat "$OUT"
