#!/usr/bin/env bash
# Our tower layer next to tower-resilience-bulkhead (the closest Rust bulkhead) through the
# API both have: a tower Service called as `ready().await` + `call(req).await` on a
# current-thread tokio runtime (benches/peers.rs). Writes benches/results/peers.md.
#
#   benches/peers.sh      (about 2 minutes; needs valgrind)
#
# Instructions: callgrind at n and at 0, (difference) / n, exact for this build whatever the
# load. Allocations and bytes: a counting allocator, (difference) / n, also exact. Time: wall
# clock of the same runs, (difference) / n: indicative only on a shared machine.
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=benches/results/peers.md
WORK="${CARGO_TARGET_DIR:-target}/peers"
mkdir -p "$WORK" benches/results

cargo bench --no-run --features tower --bench peers
PEERS="$(cargo bench --no-run --features tower --bench peers --message-format=json 2>/dev/null |
    python3 benches/report.py executable peers)"

EXE="$PEERS"
source benches/valgrind.sh
field() { # line key -> value
    tr '\t' '\n' <<<"$1" | sed -n "s/^$2=//p"
}

{
    echo "# Our tower layer next to tower-resilience-bulkhead"
    echo
    echo "Written by \`benches/peers.sh\` at commit \`$(git rev-parse --short HEAD)\`"
    echo "($(rustc -V); tower-resilience-bulkhead $(cargo tree -e normal,dev -i tower-resilience-bulkhead \
        --features tower --depth 0 2>/dev/null | head -1 | awk '{print $2}')). One call = \`ready().await\`"
    echo "then \`call(req).await\` on a current-thread tokio runtime; both layers wrap the same"
    echo "inner service, limit 1, max wait 0 (the peer's \`reject_when_full\`); \"full\" = one"
    echo "call in flight. Instructions (callgrind) and allocations are exact; time is the wall"
    echo "clock of one run on a shared machine."
    echo
    echo "| per call | instructions | heap allocations | bytes | time |"
    echo "|---|---:|---:|---:|---:|"
    while IFS=$'\t' read -r op what n; do
        a=$("$PEERS" "$op" 0)
        b=$("$PEERS" "$op" "$n")
        i=$(per "$(instructions "$op" 0)" "$(instructions "$op" "$n")" "$n" 0)
        allocs=$(per "$(field "$a" allocs)" "$(field "$b" allocs)" "$n" 2)
        bytes=$(per "$(field "$a" bytes)" "$(field "$b" bytes)" "$n" 0)
        ns=$(per "$(field "$a" ns)" "$(field "$b" ns)" "$n" 0)
        echo "| $what | $i | $allocs | $bytes | $ns ns |"
    done < <("$PEERS" list)
} >"$OUT"
cat "$OUT"
