#!/usr/bin/env bash
# The engine must reach atomics, locks, thread parking and the clock only through
# src/sync.rs, so loom and shuttle can replace them. Fails on any direct use elsewhere in
# the engine files.
set -euo pipefail
cd "$(dirname "$0")/.."
engine=(src/state.rs src/blocking.rs src/future.rs src/bulkhead.rs src/permit.rs src/observe.rs src/keyed.rs src/timer.rs)
pattern='(std|core)::sync::atomic|parking_lot::|std::thread::(park|current)|Instant::now|loom::|shuttle::'
# Comments and doc examples (user code) may name them.
if grep -nE "$pattern" "${engine[@]}" | grep -vE '^[^:]+:[0-9]+:\s*//'; then
    echo "error: the lines above bypass src/sync.rs" >&2
    exit 1
fi
echo "shim check: ${#engine[@]} engine files use src/sync.rs only"
