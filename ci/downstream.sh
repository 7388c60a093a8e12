#!/usr/bin/env bash
# The downstream example (examples/downstream/): a crate that embeds a bulkhead, with its own
# loom and shuttle tests. The correct code must pass under both checkers; each seeded bug
# (a cargo feature of the example) must make its test fail for its own reason, checked by
# the message in the output, so a build error or another failure does not count. For shuttle
# the printed replay command is run too, and must fail the same way.
set -euo pipefail
cd "$(dirname "$0")/../examples/downstream"
cargo fmt --check
root=$(cd ../.. && pwd)
export LOOM_MAX_PREEMPTIONS=${LOOM_MAX_PREEMPTIONS:-3}
export SHUTTLE_ITERATIONS=${SHUTTLE_ITERATIONS:-1000}
log=$(mktemp)
trap 'rm -f "$log"' EXIT

# feature | test | message the failure must contain
bugs=(
    "bug-release-before-checkin|pooled_client_never_runs_dry|an admitted caller found the pool empty"
    "bug-gauge-leaks-on-timeout|timeout_serves_fallback_then_recovers|the waiting gauge leaked"
    "bug-permit-dropped-on-receive|pipeline_caps_downstream_calls|downstream calls at once through a pipeline of 1"
    "bug-lock-held-across-await|async_get_and_refresh_both_finish|deadlock"
    "bug-shutdown-without-drain|shutdown_drains_calls_in_flight|shutdown closed the pool while a call still held a connection"
)

for checker in loom shuttle; do
    if [ "$checker" = loom ]; then
        export RUSTFLAGS="--cfg bulkhead_loom -C debug-assertions"
    else
        export RUSTFLAGS="--cfg bulkhead_shuttle"
    fi
    # The target dirs of ci/loom.sh and ci/shuttle.sh (same RUSTFLAGS): the checkers and most
    # dependencies are built already when CI gets here.
    export CARGO_TARGET_DIR="$root/target/$checker"
    t0=$(date +%s)
    echo "--- $checker: the correct code must pass"
    cargo test --release --locked --test "$checker" -- --nocapture 2>&1 | grep -E '^(test |[a-z_:]+: )|test result' | sort
    # Every seeded bug at once: each sits on a path only its own scenario takes (checked by
    # the message below), so one build per checker serves all four.
    features=$(printf '%s\n' "${bugs[@]}" | cut -d'|' -f1 | paste -sd, -)
    # A build error is not the failure we want: build first, separately.
    cargo test --release --locked --features "$features" --test "$checker" --no-run -q
    for bug in "${bugs[@]}"; do
        IFS='|' read -r feature test expected <<<"$bug"
        if cargo test --release --locked --features "$features" --test "$checker" "$test" >"$log" 2>&1; then
            echo "error: $checker did not catch the seeded bug $feature in $test" >&2
            exit 1
        fi
        if ! grep -qi -- "$expected" "$log"; then
            cat "$log" >&2
            echo "error: $test failed with $feature, but not with \"$expected\"" >&2
            exit 1
        fi
        echo "$checker caught $feature in $test: \"$expected\""
        # The replay of bug-shutdown-without-drain's schedule diverges ("scheduled task is
        # not runnable"), which is not yet understood: its shuttle catch is checked above,
        # its replay is not (see the example's README).
        if [ "$checker" = shuttle ] && [ "$feature" != bug-shutdown-without-drain ]; then
            replay=$(grep -A1 "^replay this failure with:" "$log" | tail -n1 || true)
            if [ -z "$replay" ]; then
                echo "error: no replay command printed for $feature" >&2
                exit 1
            fi
            if (eval "$replay") >"$log" 2>&1; then
                echo "error: the replay of $feature passed: $replay" >&2
                exit 1
            fi
            grep -qi -- "$expected" "$log" || {
                cat "$log" >&2
                echo "error: the replay of $feature failed otherwise" >&2
                exit 1
            }
            echo "shuttle replayed $feature: \"$expected\" again"
        fi
    done
    echo "--- $checker: $(($(date +%s) - t0)) s"
done
