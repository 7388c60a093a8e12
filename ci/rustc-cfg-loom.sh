#!/usr/bin/env bash
# RUSTC_WRAPPER for ci/cfg-loom.sh: adds `--cfg loom` to the compilation of the `bulkhead`
# crate only (its lib, its unit tests, and the lib that integration tests link), and logs
# each such compilation to $CFG_LOOM_LOG so the script can check the flag really reached it.
# Every other crate (tokio, parking_lot, ...) compiles unchanged.
rustc=$1
shift
for arg in "$@"; do
    if [ "$arg" = bulkhead ] && [ "${prev:-}" = --crate-name ]; then
        echo "bulkhead $*" >>"${CFG_LOOM_LOG:?}"
        exec "$rustc" "$@" --cfg loom
    fi
    prev=$arg
done
exec "$rustc" "$@"
