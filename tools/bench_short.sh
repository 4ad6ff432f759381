#!/usr/bin/env bash
# tools/bench_short.sh: every bench/ program runs, briefly, so that none
# rots unnoticed (a benchmark is never a test: nothing here judges a
# figure). Builds //bench:all, then runs each program with --short --json
# (bench/alloc_arenas: one round; bench/mpi_allreduce: under
# `mpirun -np 2 --bind-to core` where mpirun exists, else skipped) and
# requires exit status 0 and stdout that parses as one JSON document
# (python3's json.load). Every program target of bench/BUILD.bazel must be
# in the list below: one that is not fails the run ("not run here"), so a
# new benchmark gets its short mode when it lands.
# Prints one line per program, "bench: //bench:NAME: ok (S s)",
# "bench: ...: FAILED: why (S s)" or "bench: ...: SKIPPED: why", then
# "N passed, N failed, N skipped"; exit status 1 on any failure. CI runs it
# as stage 11 (.ci/run). About 60 s on a quiet 2-CPU machine.
set -uo pipefail
cd "$(dirname "$0")/.."

# name -> how it runs (after bazel-bin/bench/NAME).
declare -A ARGS=(
    [alloc]="--short --json"
    [alloc_mmap_arena]="--short --json"
    [alloc_arenas]="--short --json 1"
    [arbiter]="--short --json"
    [decode]="--short --json"
    [forkjoin]="--short --json"
    [forkjoin_gomp]="--short --json"
    [forkjoin_libomp]="--short --json"
    [forkjoin_tbb]="--short --json"
    [kernels]="--short --json"
    [mpi_allreduce]="--short --json"
    [runtime_create]="--short --json"
    [service]="--short --json"
    [sgemm_native_probe]="--short --json"
    [span]="--short --json"
)
# Rules of bench/ that are not programs, or whose program has another name.
# forkjoin_contender and forkjoin_nocounters are forkjoin built again (the
# second with the counters compiled out), run by forkjoin as its children.
declare -A NOT_PROGRAMS=([forkjoin_libomp_build]=forkjoin_libomp [forkjoin_contender]=forkjoin
    [forkjoin_nocounters]=forkjoin)

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
passed=0 failed=0 skipped=0

if ! bazel build //bench:all >"$work/build.log" 2>&1; then
    grep -E 'ERROR|error:' "$work/build.log" | head -20
    echo "bench: //bench:all: FAILED: the build failed"
    echo "0 passed, 1 failed, 0 skipped"
    exit 1
fi

# Every program rule is in the table.
while read -r kind _ label; do
    name=${label#//bench:}
    [ "$kind" = cc_library ] && continue
    [ -n "${NOT_PROGRAMS[$name]+x}" ] && name=${NOT_PROGRAMS[$name]}
    if [ -z "${ARGS[$name]+x}" ]; then
        echo "bench: $label: FAILED: not run here (add it to tools/bench_short.sh with a short mode)"
        failed=$((failed + 1))
    fi
done < <(bazel query 'kind(rule, //bench:*)' --output=label_kind 2>"$work/query.err")

run() { # name command...
    local name=$1 t0=$SECONDS rc
    shift
    timeout 180 "$@" >"$work/out" 2>"$work/err"
    rc=$?
    if [ "$rc" -ne 0 ]; then
        echo "bench: //bench:$name: FAILED: exit status $rc ($((SECONDS - t0)) s)"
        tail -5 "$work/err" | sed 's/^/    /'
        failed=$((failed + 1))
    elif ! python3 -c 'import json, sys; json.load(open(sys.argv[1]))' "$work/out" \
        2>"$work/json.err"; then
        echo "bench: //bench:$name: FAILED: stdout is not one JSON document ($((SECONDS - t0)) s)"
        tail -1 "$work/json.err" | sed 's/^/    /'
        head -c 300 "$work/out" | sed 's/^/    /'
        echo
        failed=$((failed + 1))
    else
        echo "bench: //bench:$name: ok ($((SECONDS - t0)) s)"
        passed=$((passed + 1))
    fi
}

for name in $(printf '%s\n' "${!ARGS[@]}" | sort); do
    # shellcheck disable=SC2086
    if [ "$name" = mpi_allreduce ]; then
        if ! command -v mpirun >/dev/null; then
            echo "bench: //bench:mpi_allreduce: SKIPPED: no mpirun on this machine"
            skipped=$((skipped + 1))
            continue
        fi
        # As root, OpenMPI wants both of these (as tools/mpi_test.sh).
        if [ "$(id -u)" -eq 0 ]; then
            export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
        fi
        run "$name" mpirun -np 2 --bind-to core "bazel-bin/bench/$name" ${ARGS[$name]}
    else
        run "$name" "bazel-bin/bench/$name" ${ARGS[$name]}
    fi
done

echo "$passed passed, $failed failed, $skipped skipped"
[ "$failed" -eq 0 ]
