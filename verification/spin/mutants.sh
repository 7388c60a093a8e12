#!/usr/bin/env bash
# Proves the spin model bites: checks bulkhead.pml with each seeded protocol bug
# (`spin -DMUTANT=N`, the `#if MUTANT` blocks in the model) and prints which properties
# catch it. Exits non-zero if any mutant survives every property, or if the unmutated
# model fails.
#
# Usage: verification/spin/mutants.sh [N...]      (default: every mutant)
# Environment: JOBS=N mutants checked in parallel (default 2); DEPTH as for run.sh.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
JOBS=${JOBS:-2}

# id | configuration (see run.sh) | the bug, as it would be written in src/engine/state.rs
# (7 is gone with the tombstones; 18, admits_newcomer ignoring CLOSED, is an equivalent
# mutant: close sets WAITERS with CLOSED and it stays set, so WAITERS alone refuses. The
# model keeps its #if; see README.md.)
MUTANTS=(
  "1|limit1|release: ignores the WAITERS bit its fetch_add saw, never locks to drain"
  "2|limit1|withdraw: drops an existing grant (returns None for a Granted slot: the permit is lost)"
  "3|limit1|enqueue: never drains after fetch_or(WAITERS) and linking, even when a permit was free"
  "4|limit1|withdraw: clears WAITERS while waiters remain queued"
  "5|limit1|async drop (Core::cancel): forgets a granted permit instead of releasing it"
  "6|limit1|try_acquire: admits a newcomer while WAITERS is set (barging)"
  "8|limit1|enqueue: sets WAITERS only after its drain"
  "9|grow|set_limit: growth with waiters queued never drains them"
  "10|shrink|set_limit: a shrink clamps available at 0 (forgives the debt, creates permits)"
  "11|limit1|drain: off by one, grants while available == 0 (tests < 0 instead of <= 0)"
  "12|limit1|enqueue: decides whether to drain from try_acquire's load, not from fetch_or's previous word"
  "13|close1|drain: clears WAITERS when the queue is empty even though CLOSED is set"
  "14|close1|enqueue: ignores CLOSED, queues the caller on a closed bulkhead"
  "15|close1|drain: the release that leaves nothing in flight does not complete the drain waiters"
  "16|limit1|withdraw: frees its slot but leaves it linked in the FIFO"
  "17|close1|close: marks the queued waiters Closed but does not wake them"
  "19|close1|drain: completes the drain waiters while calls are still in flight"
  "20|close1|close: sets CLOSED | WAITERS but forgets the queued waiters"
)

selected=("$@")
work=$(mktemp -d "${TMPDIR:-/tmp}/bulkhead-spin-mutants.XXXXXX")
trap 'rm -rf "$work"' EXIT

# one ID CONFIG: runs every property of CONFIG on mutant ID (all of them, even after a
# failure), writes $work/ID.result.
one() {
  local id=$1 cfg=$2
  MUTANT=$id KEEP_GOING=1 JOBS=1 SPIN_WORK="$work/m$id" "$here/run.sh" "$cfg" \
    > "$work/$id.log" 2>&1 || true
  local caught first
  caught=$(awk '$4 == "FAIL" {print $2}' "$work/$id.log" | paste -sd, - || true)
  first=$(grep -m1 -E '^ +FAIL \(' "$work/$id.log" | sed 's/  \[.*//; s/^ *FAIL //' || true)
  if [ -n "$caught" ]; then
    echo "CAUGHT by $caught" > "$work/$id.result"
    echo "    first report: ${first:-?}" >> "$work/$id.result"
  else
    echo "MISSED" > "$work/$id.result"
  fi
  sed -n '/^---/,$p' "$work/$id.log" | grep -E '^(---|[a-z0-9]+ +[a-z_+]+ )' \
    > "$work/$id.detail" || true
}

start=$(date +%s)
running=0
for m in "${MUTANTS[@]}"; do
  IFS='|' read -r id cfg what <<< "$m"
  if [ ${#selected[@]} -gt 0 ] && [[ ! " ${selected[*]} " =~ \ $id\  ]]; then continue; fi
  if [ "$running" -ge "$JOBS" ]; then wait -n || true; running=$((running - 1)); fi
  one "$id" "$cfg" &
  running=$((running + 1))
done
wait

missed=0
for m in "${MUTANTS[@]}"; do
  IFS='|' read -r id cfg what <<< "$m"
  [ -f "$work/$id.result" ] || continue
  echo "mutant $id [$cfg] $what"
  sed 's/^/  /' "$work/$id.result"
  if [ "${VERBOSE:-0}" = 1 ]; then sed 's/^/      /' "$work/$id.detail"; fi
  grep -q '^CAUGHT' "$work/$id.result" || missed=$((missed + 1))
done
end=$(date +%s)
if [ "$missed" -gt 0 ]; then
  echo "mutants: $missed MISSED ($((end - start)) s wall)"
  exit 1
fi
echo "mutants: every mutant caught ($((end - start)) s wall)"
