#!/usr/bin/env bash
# What `bulkhead` with `default-features = false` adds to an embedder's crate, next to tokio
# with only its `sync` feature and async-lock (issue 30). Prints a markdown report on stdout
# (benches/results/footprint.md is its output, with the analysis added by hand).
#
#   benches/footprint.sh                 (about 3 minutes on 2 cores)
#   BULKHEAD_DIR=/some/checkout benches/footprint.sh    (measure another tree of this crate)
#   RUNS=5 benches/footprint.sh          (more cold builds per probe; default 3)
#
# One-file probe crates in a temp dir: `empty` (`fn main() {}`, no dependency), one
# each for bulkhead (a path dependency on this tree, default-features = false), tokio
# (default-features = false, features = ["sync"]) and async-lock: `main` makes a semaphore
# of 4, try-acquires a permit, prints what is available, and releases it, so the dependency
# is linked into a real binary. And `bulkhead-deps`: bulkhead's own non-optional
# dependencies, each used once, without bulkhead. For each probe:
# - crates: `cargo tree -e normal` for the host target, the probe itself left out;
# - cold build time: release and debug, each from an empty CARGO_TARGET_DIR, with every
#   crate already downloaded (`cargo fetch`, then `--offline`). The runs are interleaved
#   (empty bulkhead bulkhead-deps tokio async-lock, then again, RUNS times), so a burst of load from
#   elsewhere hits all probes alike; each run and the median are printed;
# - binary size: the release binary as cargo leaves it (the release profile's default
#   `strip = "debuginfo"`: symbols kept) and after `strip` (no symbols), and each one's growth
#   over `empty`'s.
set -euo pipefail
cd "$(dirname "$0")/.."
BULKHEAD_DIR="$(cd "${BULKHEAD_DIR:-.}" && pwd)"
RUNS="${RUNS:-3}"
WORK="$(mktemp -d /tmp/footprint.XXXXXX)"
trap 'rm -rf "$WORK"' EXIT
PROBES=(empty bulkhead bulkhead-deps tokio async-lock)

probe() { # name dependency-line body
    local dir="$WORK/$1"
    mkdir -p "$dir/src"
    cat >"$dir/Cargo.toml" <<EOF
[package]
name = "probe-$1"
version = "0.0.0"
edition = "2021"
publish = false

[dependencies]
$2

[workspace]
EOF
    printf '%s\n' "$3" >"$dir/src/main.rs"
}

probe empty "" 'fn main() {}'
probe bulkhead "bulkhead = { path = \"$BULKHEAD_DIR\", default-features = false }" \
'use bulkhead::{Bulkhead, BulkheadConfig};

fn main() {
    let bulkhead = Bulkhead::new("probe", BulkheadConfig::for_pool(4));
    let permit = bulkhead.try_acquire().expect("a free permit");
    println!("{}", bulkhead.metrics().available_concurrent_calls());
    drop(permit);
}'
# bulkhead's own non-optional dependencies without bulkhead (kept in step with Cargo.toml by
# hand): how much of bulkhead's build is theirs and how much its own code.
probe bulkhead-deps 'parking_lot = "0.12"
hashbrown = { version = "0.16", default-features = false }
pin-project-lite = "0.2"' \
'pin_project_lite::pin_project! {
    struct Pinned<F> {
        #[pin]
        inner: F,
    }
}

fn main() {
    let lock = parking_lot::Mutex::new(hashbrown::HashTable::<u64>::new());
    lock.lock().insert_unique(4, 4, |v| *v);
    let pinned = core::pin::pin!(Pinned { inner: core::future::ready(()) });
    let _inner = pinned.project().inner;
    println!("{}", lock.lock().len());
}'
probe tokio 'tokio = { version = "1", default-features = false, features = ["sync"] }' \
'fn main() {
    let semaphore = tokio::sync::Semaphore::new(4);
    let permit = semaphore.try_acquire().expect("a free permit");
    println!("{}", semaphore.available_permits());
    drop(permit);
}'
probe async-lock 'async-lock = "3"' \
'fn main() {
    let semaphore = async_lock::Semaphore::new(4);
    let permit = semaphore.try_acquire().expect("a free permit");
    println!("{}", semaphore.available_permits());
    drop(permit);
}'

for p in "${PROBES[@]}"; do
    (cd "$WORK/$p" && cargo fetch --quiet)
done

# crates of one probe's normal tree, one per line ("name version"), the probe left out
crates() {
    (cd "$WORK/$1" && cargo tree --offline -e normal --prefix none 2>/dev/null) |
        sed 's/ (\*)$//; s/ (proc-macro)$//; s/ (\/.*)$//' | awk '{print $1, $2}' |
        { grep -v "^probe-$1 " || true; } | sort -u
}

now() { date +%s.%N; }
# seconds of one cold build: probe profile run
build() {
    local target="$WORK/target-$1-$2-$3" flag=()
    [[ $2 == release ]] && flag=(--release)
    local t0 t1
    t0=$(now)
    (cd "$WORK/$1" && CARGO_TARGET_DIR="$target" cargo build --offline --quiet "${flag[@]}")
    t1=$(now)
    if [[ $2 == release && $3 == 1 ]]; then
        cp "$target/release/probe-$1" "$WORK/bin-$1"
    fi
    rm -rf "$target"
    awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.2f", b - a }'
}

declare -A T
for run in $(seq 1 "$RUNS"); do
    for profile in release debug; do
        for p in "${PROBES[@]}"; do
            T[$p,$profile,$run]=$(build "$p" "$profile" "$run")
            echo "run $run $profile $p: ${T[$p,$profile,$run]} s (load $(cut -d' ' -f1 /proc/loadavg))" >&2
        done
    done
done

# "median (min-max)" of one probe's runs in one profile, and the runs themselves
stats() {
    local xs=() r
    for r in $(seq 1 "$RUNS"); do xs+=("${T[$1,$2,$r]}"); done
    printf '%s\n' "${xs[@]}" | sort -g | awk '{ v[NR] = $1 }
        END { m = (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2
              printf "%.2f (%.2f-%.2f)", m, v[1], v[NR] }'
}
runs() {
    local out="" r
    for r in $(seq 1 "$RUNS"); do out+="${out:+, }${T[$1,$2,$r]}"; done
    echo "$out"
}

size() { stat -c %s "$1"; }
for p in "${PROBES[@]}"; do
    cp "$WORK/bin-$p" "$WORK/bin-$p.stripped"
    strip "$WORK/bin-$p.stripped"
done
E=$(size "$WORK/bin-empty")
ES=$(size "$WORK/bin-empty.stripped")

echo "Written by \`benches/footprint.sh\` at commit \`$(git -C "$BULKHEAD_DIR" rev-parse --short HEAD 2>/dev/null || echo '?')\`"
echo "of the measured tree ($(rustc -V), $(cargo -V | cut -d' ' -f1-2), $(nproc) cores, $(uname -m),"
echo "$RUNS cold builds per probe and profile, interleaved)."
echo
echo "| probe | crates (the dependency included) | cold release build, s: median (min-max) | cold debug build, s | release binary, bytes (growth) | stripped (growth) |"
echo "|---|---:|---:|---:|---:|---:|"
for p in "${PROBES[@]}"; do
    n=$(crates "$p" | wc -l)
    s=$(size "$WORK/bin-$p")
    ss=$(size "$WORK/bin-$p.stripped")
    echo "| $p | $n | $(stats "$p" release) | $(stats "$p" debug) | $s (+$((s - E))) | $ss (+$((ss - ES))) |"
done
echo
echo "Each run, in seconds (run 1, 2, ...):"
echo
echo "| probe | release | debug |"
echo "|---|---|---|"
for p in "${PROBES[@]}"; do
    echo "| $p | $(runs "$p" release) | $(runs "$p" debug) |"
done
echo
echo "Crates in each probe's \`cargo tree -e normal\` (host target; the probe itself left out):"
echo
for p in "${PROBES[@]}"; do
    list=$(crates "$p" | paste -sd, - | sed 's/,/, /g')
    echo "- $p: ${list:-(none)}"
done
