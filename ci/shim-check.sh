#!/usr/bin/env bash
# The engine must reach atomics, locks, thread parking and the clock only through
# src/engine/sync.rs, so loom and shuttle can replace them. Fails on any direct use elsewhere in
# the engine files.
set -euo pipefail
cd "$(dirname "$0")/.."
engine=(src/engine/state.rs src/bulkhead/blocking.rs src/bulkhead/future.rs src/bulkhead/mod.rs src/bulkhead/permit.rs src/observe/mod.rs src/keyed/*.rs src/engine/timer.rs)
pattern='(std|core)::sync::atomic|parking_lot::|std::thread::(park|current)|Instant::now|loom::|shuttle::'
# Comments and doc examples (user code) may name them.
if grep -nE "$pattern" "${engine[@]}" | grep -vE '^[^:]+:[0-9]+:\s*//'; then
    echo "error: the lines above bypass src/engine/sync.rs" >&2
    exit 1
fi
echo "shim check: ${#engine[@]} engine files use src/engine/sync.rs only"
