#!/usr/bin/env bash
# fuzz.sh -- builds nxr's libFuzzer targets with clang and runs each for a
# bounded time over its seed corpus.
#
#     tools/fuzz.sh [SECONDS_PER_TARGET]     # default 20; .ci/run uses 20 x 3
#
# Targets (tests/fuzz/*_fuzz.c): domains (NXR_DOMAINS parser + validation),
# topology (NXR_TOPOLOGY / hwloc synthetic descriptions + default plan),
# settings (every NXR_* variable and the option fields). Built with
# -fsanitize=fuzzer,address,undefined (LeakSanitizer included), straight
# from the sources they need: libFuzzer is clang's, and building them with
# Bazel would need a second toolchain. Seeds live in tests/fuzz/corpus/<target>;
# new inputs go to a scratch corpus, never into the tree. A crash, leak or
# violated property stops the run; its input is kept and printed.
# Prints one line per target: "fuzz <target>: <execs> execs in <s> s, ...".
set -euo pipefail

cd "$(dirname "$0")/.."
SECONDS_PER_TARGET=${1:-20}
CC=${FUZZ_CC:-}
if [[ -z $CC ]]; then
    for c in clang clang-14 clang-15 clang-16; do
        command -v "$c" >/dev/null && { CC=$c; break; }
    done
fi
[[ -n $CC ]] || { echo "fuzz.sh: clang not found (tools/setup.sh installs it)" >&2; exit 2; }

work=$(mktemp -d "${TMPDIR:-/tmp}/nxr-fuzz.XXXXXX")
trap 'rm -rf "$work"' EXIT

CFLAGS=(-std=c11 -D_GNU_SOURCE -I. -g -O1 -fno-omit-frame-pointer
        -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined
        -Wall -Wextra -Werror -Wno-unused-command-line-argument)
DOMAINS_SRCS=(domains/decl_parse.c domains/plan.c domains/cpuset.c domains/topology.c
              base/sys.c base/status.c base/strbuf.c base/last_error.c base/number.c)
declare -A SRCS=(
    [domains]="${DOMAINS_SRCS[*]}"
    [topology]="${DOMAINS_SRCS[*]}"
    [settings]="${DOMAINS_SRCS[*]} runtime/options.c"
)
LIBS=(-lhwloc -lnuma -lpthread)

status=0
for t in domains topology settings; do
    bin=$work/${t}_fuzz
    # shellcheck disable=SC2086  # the source lists are word lists
    if ! "$CC" "${CFLAGS[@]}" -o "$bin" "tests/fuzz/${t}_fuzz.c" ${SRCS[$t]} "${LIBS[@]}"; then
        echo "fuzz $t: FAILED TO BUILD"
        status=1
        continue
    fi
    mkdir -p "$work/$t.corpus" "$work/$t.artifacts"
    log=$work/$t.log
    rc=0
    # The scratch corpus comes first: libFuzzer adds new inputs to it.
    ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
        "$bin" "$work/$t.corpus" "tests/fuzz/corpus/$t" \
        -max_total_time="$SECONDS_PER_TARGET" -timeout=10 -rss_limit_mb=2048 -max_len=1024 \
        -print_final_stats=1 -artifact_prefix="$work/$t.artifacts/" >"$log" 2>&1 || rc=$?
    execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
    cov=$(grep -o 'cov: [0-9]*' "$log" | tail -1 | cut -d' ' -f2)
    seeds=$(find "tests/fuzz/corpus/$t" -type f | wc -l)
    if ((rc == 0)); then
        echo "fuzz $t: ${execs:-?} execs in ${SECONDS_PER_TARGET} s, ${cov:-?} edges covered, $seeds seeds, no crash, no leak"
    else
        echo "fuzz $t: FAILED (status $rc) after ${execs:-?} execs"
        grep -E 'ERROR|property violated|SUMMARY|^input|^spec|Test unit written' "$log" | head -20
        for a in "$work/$t.artifacts"/*; do
            [[ -f $a ]] || continue
            echo "  input ($a):"; od -c "$a" | head -10
            mkdir -p fuzz-artifacts && cp "$a" fuzz-artifacts/ && echo "  kept in fuzz-artifacts/$(basename "$a")"
        done
        status=1
    fi
done
exit "$status"
