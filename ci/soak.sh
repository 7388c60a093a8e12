#!/usr/bin/env bash
# Reliability job: the soak test in release for a bounded time, the fuzz corpus replay,
# and, only if cargo-fuzz is already installed, a brief run of each fuzz target.
#
#   ci/soak.sh                  60 s soak; fuzz targets 20 s each if cargo-fuzz is there
#   SOAK_SECS=600 ci/soak.sh    a longer soak
#   FUZZ_SECS=0 ci/soak.sh      skip the fuzz run even if cargo-fuzz is installed
set -euo pipefail
cd "$(dirname "$0")/.."

export SOAK_SECS=${SOAK_SECS:-60}
FUZZ_SECS=${FUZZ_SECS:-20}

echo "::: soak for ${SOAK_SECS} s (release)"
cargo test --release --test soak -- --ignored --nocapture

echo "::: waiter storm and corpus replay (release)"
cargo test --release --test waiter_storm --test fuzz_corpus --test junction_props -- --nocapture

# CI does not spend minutes installing cargo-fuzz: the corpus replay above covers it.
if [ "$FUZZ_SECS" -gt 0 ] && cargo fuzz --version >/dev/null 2>&1; then
    fuzz/run.sh "$FUZZ_SECS"
else
    echo "::: fuzz run skipped (cargo-fuzz not installed or FUZZ_SECS=0); corpus replayed above"
fi
