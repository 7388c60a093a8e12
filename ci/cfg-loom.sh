#!/usr/bin/env bash
# A user's own `--cfg loom` (the plain name many crates key their loom tests on) must not
# change or break this crate: we key ours on `bulkhead_loom`. This builds exactly our crate
# with `--cfg loom` and runs its unit tests and three integration tests.
#
# Why not `RUSTFLAGS="--cfg loom"`: RUSTFLAGS reaches every crate, and tokio switches to its
# own loom internals under `cfg(loom)`, which it only builds for its own tests, so such a
# build fails inside tokio before it reaches us (docs/model-checking.md). A
# RUSTC_WRAPPER (ci/rustc-cfg-loom.sh) adds the flag to the `bulkhead` crate alone. Cargo
# does not fingerprint the wrapper, so a profile override on our package alone (a codegen-units
# value no build of ours uses) gives these artifacts their own hash: the dependencies are
# shared with `cargo test`, and neither build can pick up the other's `bulkhead`.
set -euo pipefail
cd "$(dirname "$0")/.."
export CFG_LOOM_LOG
CFG_LOOM_LOG=$(mktemp)
out=$(mktemp)
trap 'rm -f "$CFG_LOOM_LOG" "$out"' EXIT
export RUSTC_WRAPPER="$PWD/ci/rustc-cfg-loom.sh"
override='profile.dev.package.bulkhead.codegen-units=255'
cargo test --locked --config "$override" --lib --test try_acquire --test deadline \
    --test async_acquire -- --nocapture 2>&1 | tee "$out" | grep -E '^test result|^cfg\(loom\)'
# The check is only worth something if our crate really was compiled with the flag (a unit
# test prints it; a rebuild also leaves a line per compilation in the wrapper's log).
if ! grep -q '^cfg(loom) is set' "$out"; then
    echo "error: --cfg loom did not reach the bulkhead crate" >&2
    exit 1
fi
if grep -q '^test result: FAILED' "$out"; then
    exit 1
fi
echo "cfg-loom: bulkhead built with --cfg loom ($(wc -l <"$CFG_LOOM_LOG") compilations this run); tests pass"
