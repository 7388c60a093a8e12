#!/usr/bin/env bash
# Runs each fuzz target for a bounded time.
#
#   fuzz/run.sh [SECONDS] [TARGET...]     default: 60 s each, targets ops, config_parsers, keyed,
#                                       junctions
#
# Needs cargo-fuzz (`cargo install --locked cargo-fuzz`). Builds without a sanitizer
# (`-s none`), which works on the stable toolchain; set RUSTC_BOOTSTRAP=1 if your cargo-fuzz
# version insists on nightly flags. New inputs go to fuzz/target/work/<target> (not
# committed); the committed corpus (fuzz/corpus/<target>) and seeds (fuzz/seeds/<target>)
# are read, never written. A crash leaves its input in fuzz/artifacts/<target>/ and fails
# the script. To refresh the committed corpus, see RELIABILITY.md.
set -euo pipefail
cd "$(dirname "$0")"

secs=${1:-60}
shift || true
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
    targets=(ops config_parsers keyed junctions)
fi

if ! cargo fuzz --version >/dev/null 2>&1; then
    echo "cargo-fuzz is not installed: cargo install --locked cargo-fuzz" >&2
    exit 2
fi

for target in "${targets[@]}"; do
    work="target/work/${target}"
    mkdir -p "$work" "corpus/${target}"
    dirs=("$work" "corpus/${target}")
    if [ -d "seeds/${target}" ]; then
        dirs+=("seeds/${target}")
    fi
    flags=(-max_total_time="$secs" -print_final_stats=1)
    if [ -f "${target}.dict" ]; then
        flags+=(-dict="${target}.dict")
    fi
    echo "::: fuzz ${target} for ${secs} s"
    cargo fuzz run -s none "$target" "${dirs[@]}" -- "${flags[@]}"
done
