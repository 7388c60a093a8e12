#!/usr/bin/env bash
# Checks that the README states facts, not hopes:
# 1. its list of dependencies with `default-features = false` (between the
#    `<!-- deps: no-default-features` and `<!-- /deps -->` markers, each name in backticks)
#    is exactly the direct normal dependencies cargo resolves for that build;
# 2. its test command (the `cargo test` line of "Set-up: the two commands") is the one
#    .ci/run's `test` step runs.
set -euo pipefail
cd "$(dirname "$0")/.."

readme_test=$(awk '/^## Set-up: the two commands/{p=1} p && /^cargo test/{sub(/ *#.*/, ""); print; exit}' README.md)
ci_test=$(awk '/^step test /{sub(/^step test /, ""); print; exit}' .ci/run)
if [ -z "$readme_test" ] || [ "$readme_test" != "$ci_test" ]; then
    echo "readme-check: README's test command '$readme_test' is not .ci/run's '$ci_test'" >&2
    exit 1
fi
echo "readme-check: README's test command is .ci/run's test step: $ci_test"

readme=$(awk '/<!-- deps: no-default-features/{p=1; next} /<!-- \/deps -->/{p=0} p' README.md |
    grep -o '`[^`]*`' | tr -d '`' | sort -u)
actual=$(cargo tree --locked -p bulkhead --no-default-features -e normal --depth 1 --prefix none \
    --format '{p}' | tail -n +2 | awk '{print $1}' | sort -u)

if [ -z "$readme" ]; then
    echo "readme-check: no list between the deps markers in README.md" >&2
    exit 1
fi
if [ "$readme" != "$actual" ]; then
    echo "readme-check: README.md's no-default-features dependency list is out of date" >&2
    diff <(echo "$readme") <(echo "$actual") | sed 's/^</  README only:/; s/^>/  cargo tree only:/' >&2 || true
    echo "write it as: $(echo "$actual" | sed 's/.*/`&`/' | paste -sd, - | sed 's/,/, /g')" >&2
    exit 1
fi
echo "readme-check: README.md lists the $(echo "$actual" | wc -l) dependencies cargo tree shows: $(echo "$actual" | paste -sd' ' -)"
