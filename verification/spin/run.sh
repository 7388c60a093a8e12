#!/usr/bin/env bash
# Checks the Promela model of the bulkhead protocol (bulkhead.pml) with spin. For each
# configuration it builds three verifiers: a claim-less safety one (run twice: the in-model
# assertions, then invalid end states), one for the safety ltl properties (-DSAFETY) and
# one for the liveness ltl properties (-a -f, weak fairness). It runs every property that
# applies to the configuration by name, prints one line per check and exits non-zero on
# any error, on a truncated search and (every configuration run, unmutated model) on a
# statement of the model's processes that no configuration reaches.
#
# Usage: verification/spin/run.sh [CONFIG...]     (default: every configuration)
# Environment:
#   MUTANT=N      check the model with seeded bug N (see mutants.sh); default 0
#   JOBS=N        configurations checked in parallel; default 2
#   DEPTH=N       pan -m search depth bound; default 100000
#   KEEP_GOING=1  run every property even after a failure (mutants.sh uses it)
#   SPIN_WORK=DIR keep the verifiers, outputs and trails in DIR (default: a temp dir,
#                 kept only when something failed)
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
model="$here/bulkhead.pml"
MUTANT=${MUTANT:-0}
JOBS=${JOBS:-2}
DEPTH=${DEPTH:-100000}
KEEP_GOING=${KEEP_GOING:-0}
MEMLIM=${MEMLIM:-4096}
CFLAGS=${CFLAGS:--O1}

# name | spin -D flags. Client counts are fixed at 3 in the model.
declare -A CONFIGS=(
  [limit1]="-DLIMIT=1 -DCYCLES=2"
  [limit2]="-DLIMIT=2 -DCYCLES=2"
  [grow]="-DLIMIT=1 -DCYCLES=1 -DCONFIG=1 -DNEWLIMIT=2"
  [shrink]="-DLIMIT=2 -DCYCLES=1 -DCONFIG=1 -DNEWLIMIT=1 -DCLOSE=1"
  [close1]="-DLIMIT=1 -DCYCLES=1 -DCLOSE=1 -DDRAIN=1"
  [close2]="-DLIMIT=2 -DCYCLES=1 -DCLOSE=1 -DDRAIN=2"
)
ORDER=(limit1 close1 limit2 grow shrink close2)
SAFETY_PROPS=(within_limit admits_within_limit accounting one_fate no_barging flag_tracks_queue
  free_permit_drained)
CLOSE_PROPS=(no_admit_after_close none_queued_after_close drained_when_idle)
LIVENESS_PROPS=(queued_served all_back)
DRAIN_PROPS=(drain_released)

if ! command -v spin >/dev/null 2>&1; then
  echo "spin not found: installing the Debian package (needs root)" >&2
  apt-get update -qq && apt-get install -y -qq spin >/dev/null
fi
if ! command -v gcc >/dev/null 2>&1; then
  apt-get update -qq && apt-get install -y -qq gcc >/dev/null
fi

selected=("$@")
if [ ${#selected[@]} -eq 0 ]; then selected=("${ORDER[@]}"); fi
for c in "${selected[@]}"; do
  [ -n "${CONFIGS[$c]+x}" ] || { echo "unknown configuration: $c" >&2; exit 2; }
done

if [ -n "${SPIN_WORK:-}" ]; then
  work=$SPIN_WORK; mkdir -p "$work"; keep_work=1
else
  work=$(mktemp -d "${TMPDIR:-/tmp}/bulkhead-spin.XXXXXX"); keep_work=0
fi

# check OUT: prints "ok" or the failure reason; returns 0 when the run is clean.
check() {
  local out=$1 kind=$2
  local why
  why=$(grep -m1 -E '^pan:[0-9]+:' "$out" || true)
  if [ -n "$why" ]; then echo "FAIL ($why)"; return 1; fi
  if grep -q -E 'max search depth too small|Search not completed|reached -DMEMLIM' "$out"; then
    echo "FAIL (search truncated: raise DEPTH / MEMLIM)"; return 1
  fi
  if ! grep -q -E 'errors: 0$' "$out"; then echo "FAIL (no 'errors: 0' line)"; return 1; fi
  if [ "$kind" = liveness ] && ! grep -q 'fairness enabled' "$out"; then
    echo "FAIL (weak fairness was not enabled)"; return 1
  fi
  echo ok
}

# pan DIR OUT CMD...: runs a verifier in DIR, output to OUT, CPU seconds to OUT.cpu; a
# counterexample trail is kept as OUT with .out replaced by .trail.
pan() {
  local dir=$1 out=$2
  shift 2
  local TIMEFORMAT='%3U %3S'
  rm -f "$dir/bulkhead.pml.trail"
  { time (cd "$dir" && "$@" > "$out" 2>&1) ; } 2> "$out.time" || true
  awk '{printf "%.2f", $1 + $2}' "$out.time" > "$out.cpu" 2>/dev/null || true
  if [ -f "$dir/bulkhead.pml.trail" ]; then
    mv "$dir/bulkhead.pml.trail" "$dir/$(basename "$out" .out).trail"
  fi
}

# summary CONFIG PROP KIND OUT: one line per property.
summary() {
  local cfg=$1 prop=$2 kind=$3 out=$4 verdict=$5
  local stored visited secs cpu
  stored=$(grep -m1 -E 'states, stored' "$out" | awk '{print $1}' || true)
  visited=$(grep -m1 -oE '\(([0-9.e+]+) visited\)' "$out" | tr -d '()' | awk '{print $1}' || true)
  secs=$(grep -m1 -oE 'elapsed time [0-9.e+-]+' "$out" | awk '{print $3}' || true)
  cpu=$(cat "$out.cpu" 2>/dev/null || true)
  printf '%-7s %-23s %-9s %-4s states=%-8s %s wall=%ss cpu=%ss\n' "$cfg" "$prop" "$kind" \
    "$( [ "$verdict" = ok ] && echo PASS || echo FAIL)" "${stored:-?}" \
    "${visited:+visited=$visited}" "${secs:-?}" "${cpu:-?}"
  if [ "$verdict" != ok ]; then echo "        $verdict  [$out]"; fi
}

# run_config NAME: builds and runs everything for one configuration; writes
# $work/NAME/summary; returns non-zero when any check failed.
run_config() {
  local cfg=$1 dir="$work/$1" flags="${CONFIGS[$1]} -DMUTANT=$MUTANT"
  local failed=0 verdict out
  local safety=("${SAFETY_PROPS[@]}") liveness=("${LIVENESS_PROPS[@]}")
  case " $flags " in *" -DCLOSE=1 "*) safety+=("${CLOSE_PROPS[@]}") ;; esac
  case " $flags " in *" -DDRAIN="[12]" "*) liveness+=("${DRAIN_PROPS[@]}") ;; esac
  mkdir -p "$dir/plain" "$dir/claims"
  : > "$dir/summary"
  (
    set -e
    # The claim-less verifier keeps the in-model checks; the ltl verifiers compile them
    # out (-DCLAIMS_ONLY) so each named property is judged on its own.
    # shellcheck disable=SC2086
    cd "$dir/plain" && spin -a $flags "$model" > spin.log 2>&1
    gcc $CFLAGS -w -DSAFETY -DNOCLAIM -DMEMLIM="$MEMLIM" -o pan_plain pan.c
    # shellcheck disable=SC2086
    cd "$dir/claims" && spin -a $flags -DCLAIMS_ONLY "$model" > spin.log 2>&1
    # One binary for both kinds of ltl run: safety claims without -a, liveness with -a -f.
    gcc $CFLAGS -w -DNFAIR=3 -DMEMLIM="$MEMLIM" -o pan_claims pan.c
  ) || { echo "$cfg: build failed (see $dir/*/spin.log)" >> "$dir/summary"; return 1; }

  # asserts: the in-model checks and well-formedness (invalid end states ignored: -E).
  out="$dir/asserts.out"
  pan "$dir/plain" "$out" ./pan_plain -m"$DEPTH" -E
  verdict=$(check "$out" safety) || failed=1
  summary "$cfg" asserts safety "$out" "$verdict" >> "$dir/summary"
  # Coverage (judged over every configuration at the end): the statements this
  # configuration compiles, and those it leaves unreached, as "proctype|line|statement".
  (cd "$dir/plain" && ./pan_plain -d) | awk '
    /^proctype / { p = $2 } /^claim / { p = "" }
    p != "" && / => / { l = $0; sub(/^.*bulkhead\.pml:/, "", l); n = l; sub(/ =>.*/, "", n)
                        t = l; sub(/^[0-9]+ => /, "", t); print p "|" n "|" t }' |
    sort -u > "$dir/compiled"
  awk '/^unreached in proctype / { p = $4; next } /^unreached in / { p = ""; next }
    p != "" && /bulkhead\.pml:/ { l = $0; sub(/^.*bulkhead\.pml:/, "", l); n = l
      sub(/,.*/, "", n); t = l; sub(/^[^"]*"/, "", t); sub(/"$/, "", t); print p "|" n "|" t }' \
    "$out" | sort -u > "$dir/unreached"

  # end_states: no process is stuck at the end (assertions ignored: -A).
  out="$dir/end_states.out"
  if [ "$failed" = 0 ] || [ "$KEEP_GOING" = 1 ]; then
    pan "$dir/plain" "$out" ./pan_plain -m"$DEPTH" -A
    verdict=$(check "$out" safety) || failed=1
    summary "$cfg" end_states safety "$out" "$verdict" >> "$dir/summary"
  fi

  for prop in "${safety[@]}"; do
    if [ "$failed" = 1 ] && [ "$KEEP_GOING" != 1 ]; then break; fi
    out="$dir/$prop.out"
    pan "$dir/claims" "$out" ./pan_claims -m"$DEPTH" -N "$prop"
    verdict=$(check "$out" safety) || failed=1
    summary "$cfg" "$prop" safety "$out" "$verdict" >> "$dir/summary"
  done
  for prop in "${liveness[@]}"; do
    if [ "$failed" = 1 ] && [ "$KEEP_GOING" != 1 ]; then break; fi
    out="$dir/$prop.out"
    pan "$dir/claims" "$out" ./pan_claims -m"$DEPTH" -a -f -N "$prop"
    verdict=$(check "$out" liveness) || failed=1
    summary "$cfg" "$prop" liveness "$out" "$verdict" >> "$dir/summary"
  done
  return "$failed"
}

echo "spin model: $model (MUTANT=$MUTANT, 3 clients; configurations: ${selected[*]})"
start=$(date +%s)
status=0
running=0
for cfg in "${selected[@]}"; do
  if [ "$running" -ge "$JOBS" ]; then
    wait -n || true
    running=$((running - 1))
  fi
  ( if run_config "$cfg"; then echo 0; else echo 1; fi > "$work/$cfg.status" ) &
  running=$((running + 1))
done
wait
for cfg in "${selected[@]}"; do
  [ "$(cat "$work/$cfg.status" 2>/dev/null)" = 0 ] || status=1
done
for cfg in "${selected[@]}"; do
  echo "--- $cfg: ${CONFIGS[$cfg]}"
  cat "$work/$cfg/summary"
done
end=$(date +%s)

# Coverage, unmutated model, every configuration: a statement is reached when some
# configuration that compiles it reaches it; every statement of every process must be.
if [ "$MUTANT" = 0 ] && [ $# -eq 0 ]; then
  cat "$work"/*/compiled 2>/dev/null | sort -u > "$work/all_compiled"
  for cfg in "${selected[@]}"; do
    comm -23 "$work/$cfg/compiled" "$work/$cfg/unreached" 2>/dev/null
  done | sort -u > "$work/all_reached"
  # Except in Closer the drain's grant path: close leaves no waiter queued, and none can
  # queue after it, so close's own drain never grants (bulkhead.pml "[grant path]").
  range=$(awk '/\[grant path\]/ { b = NR } /\[\/grant path\]/ { e = NR } END { print b, e }' "$model")
  comm -23 "$work/all_compiled" "$work/all_reached" |
    awk -F'|' -v r="$range" 'BEGIN { split(r, x, " ") }
      !($1 == "Closer" && $2 >= x[1] && $2 <= x[2])' > "$work/never_reached"
  n=$(wc -l < "$work/all_compiled")
  if [ "$n" -gt 0 ] && [ ! -s "$work/never_reached" ]; then
    printf '%-7s %-23s %-9s %-4s statements=%s\n' all coverage safety PASS "$n" > "$work/coverage"
  else
    status=1
    printf '%-7s %-23s %-9s %-4s statements=%s\n' all coverage safety FAIL "$n" > "$work/coverage"
    sed 's/^/        never reached: /' "$work/never_reached" >> "$work/coverage"
  fi
  echo "--- every configuration"
  cat "$work/coverage"
fi

passed=0
failed=0
for f in "${selected[@]/#/$work/}"; do
  passed=$((passed + $(awk '$4 == "PASS"' "$f/summary" | wc -l)))
  failed=$((failed + $(awk '$4 == "FAIL"' "$f/summary" | wc -l)))
done
if [ -f "$work/coverage" ]; then
  passed=$((passed + $(awk '$4 == "PASS"' "$work/coverage" | wc -l)))
  failed=$((failed + $(awk '$4 == "FAIL"' "$work/coverage" | wc -l)))
fi
if [ "$status" != 0 ] && [ "$failed" = 0 ]; then failed=1; fi   # a build failure
if [ "$status" = 0 ]; then
  echo "spin: every check holds ($((end - start)) s wall)"
  echo "spin: $passed passed, $failed failed"
  [ "$keep_work" = 1 ] || rm -rf "$work"
else
  echo "spin: $passed passed, $failed failed"
  echo "spin: FAILED ($((end - start)) s wall). Outputs and trails kept in $work;"
  echo "  replay a counterexample (asserts / end_states: in plain/, without -DCLAIMS_ONLY):"
  echo "    cd $work/<config>/claims && spin -t -k <check>.trail -p -g -l \\"
  echo "      <the -D flags above> -DMUTANT=$MUTANT -DCLAIMS_ONLY $model"
fi
exit "$status"
