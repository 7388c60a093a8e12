#!/usr/bin/env bash
# loom: every scenario in verification/scenarios.rs, explored exhaustively within a
# preemption bound (LOOM_MAX_PREEMPTIONS, default 3 here; two larger models are clamped to 2
# in verification/loom.rs). Release build with debug assertions on. Prints one line per
# model: preemption bound, executions explored, seconds.
set -euo pipefail
cd "$(dirname "$0")/.."
export RUSTFLAGS="--cfg bulkhead_loom -C debug-assertions"
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-target/loom}
export LOOM_MAX_PREEMPTIONS=${LOOM_MAX_PREEMPTIONS:-3}
stats=$(mktemp)
trap 'rm -f "$stats"' EXIT
export LOOM_STATS_FILE=$stats
# The test output is captured (loom 0.7 prints a debug line per wait); a failure shows it.
cargo test --release --test loom
sort "$stats"
# The examples of `bulkhead::model`, which exists only under this cfg (rustdoc needs the cfg
# too, to see the module); they reuse the build above.
RUSTDOCFLAGS="--cfg bulkhead_loom" cargo test --release --doc model
