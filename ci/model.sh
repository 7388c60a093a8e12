#!/usr/bin/env bash
# The proptest reference model (verification/reference_model.rs): PROPTEST_CASES random
# operation sequences (default 10000 here), each compared step by step with a sequential
# model. A failure prints proptest's shrunk minimal sequence. A debug build, so it shares
# the build of a plain `cargo test`.
set -euo pipefail
cd "$(dirname "$0")/.."
export PROPTEST_CASES=${PROPTEST_CASES:-10000}
cargo test --test reference_model
