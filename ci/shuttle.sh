#!/usr/bin/env bash
# shuttle: every scenario in verification/scenarios.rs under the random and the PCT
# scheduler (depth SHUTTLE_PCT_DEPTH, default 3), SHUTTLE_ITERATIONS schedules each
# (default 10000, the full count: the whole suite takes well under a minute). A failure
# prints shuttle's schedule and the command that replays it.
set -euo pipefail
cd "$(dirname "$0")/.."
export RUSTFLAGS="--cfg bulkhead_shuttle"
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-target/shuttle}
export SHUTTLE_ITERATIONS=${SHUTTLE_ITERATIONS:-10000}
stats=$(mktemp)
trap 'rm -f "$stats"' EXIT
export SHUTTLE_STATS_FILE=$stats
cargo test --release --test shuttle
sort "$stats"
# The examples of `bulkhead::model`, which exists only under this cfg (rustdoc needs the cfg
# too, to see the module); they reuse the build above.
RUSTDOCFLAGS="--cfg bulkhead_shuttle" cargo test --release --doc model
