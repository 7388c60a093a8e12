#!/usr/bin/env bash
# The engine must reach atomics, locks, thread parking and the clock only through
# src/engine/sync.rs, so loom and shuttle can replace them. Fails on any direct use elsewhere in
# the engine files.
set -euo pipefail
cd "$(dirname "$0")/.."
engine=(src/engine/state.rs src/bulkhead/hook.rs src/bulkhead/blocking.rs src/bulkhead/future.rs src/bulkhead/mod.rs src/bulkhead/permit.rs src/observe/mod.rs src/keyed/*.rs src/engine/timer.rs)
pattern='(std|core)::sync::atomic|parking_lot::|std::thread::(park|current)|Instant::now|loom::|shuttle::'
# Comments and doc examples (user code) may name them.
if grep -nE "$pattern" "${engine[@]}" | grep -vE '^[^:]+:[0-9]+:\s*//'; then
    echo "error: the lines above bypass src/engine/sync.rs" >&2
    exit 1
fi
# Per-thread state, anywhere in the crate, is declared in src/engine/sync.rs, which gives the
# model checkers their own thread-locals: a std thread-local outlives a loom execution and
# breaks its replay (stop 39: "Is the model fully deterministic?").
if grep -rnE 'thread_local!' src --include='*.rs' | grep -v '^src/engine/sync.rs:' |
    grep -vE '^[^:]+:[0-9]+:\s*//'; then
    echo "error: the lines above declare a thread-local outside src/engine/sync.rs" >&2
    exit 1
fi
echo "shim check: ${#engine[@]} engine files use src/engine/sync.rs only; no thread-local elsewhere"
