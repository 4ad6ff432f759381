#!/usr/bin/env bash
# The MPI test (issue 14): examples/mpi_ranks, built with a witness in front of
# MPI_Allreduce (tests/mpi/mpi_spy.c), run by OpenMPI with one rank per core,
# and checked by tests/mpi/check_ranks.py:
#   1. this machine:  mpirun -np 2 --bind-to core
#   2. synthetic:     the same, with NXR_TOPOLOGY a synthetic two-node machine
#                     whose two nodes hold the two CPUs the ranks were bound to
#                     in 1, so each rank is bound to one node's CPU
# Each check prints "mpi: <variant>: <check>: ok|FAILED"; the last line is
# "N passed, N failed". Exit status 0 only when every check passed. The only
# skip is a machine that cannot give two ranks a CPU each (fewer than two
# allowed CPUs): it says so and exits 0. A missing mpirun is a failure
# (tools/setup.sh installs openmpi-bin and libopenmpi-dev).
#
# NXR_MPI_TEST_BIND (default "core") sets --bind-to; "none" shows the test
# failing when ranks are not bound.
set -uo pipefail
cd "$(dirname "$0")/.."

bind=${NXR_MPI_TEST_BIND:-core}
passed=0 failed=0
tally() { # a check log
    passed=$((passed + $(grep -c ': ok$' "$1")))
    failed=$((failed + $(grep -c ': FAILED' "$1")))
}

allowed=$(taskset -pc $$ 2>/dev/null | sed 's/.*: //')
ncpu=$(python3 -c "import os; print(len(os.sched_getaffinity(0)))")
if [ "$ncpu" -lt 2 ]; then
    echo "mpi: SKIPPED: $ncpu allowed CPU ($allowed): two ranks bound to a core each need two"
    echo "0 passed, 0 failed"
    exit 0
fi
if ! command -v mpirun >/dev/null; then
    echo "mpi: FAILED: mpirun not found (tools/setup.sh installs openmpi-bin, libopenmpi-dev)"
    echo "0 passed, 1 failed"
    exit 1
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
if ! bazel build //examples:mpi_ranks //tests/mpi:mpi_ranks_spied >"$work/build.log" 2>&1; then
    grep -E 'ERROR|error:' "$work/build.log" | head -20
    echo "mpi: FAILED: the build failed"
    echo "0 passed, 1 failed"
    exit 1
fi
bin=bazel-bin/tests/mpi/mpi_ranks_spied

# As root, OpenMPI wants both of these (documented by mpirun itself).
if [ "$(id -u)" -eq 0 ]; then
    export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
fi
run() { # variant extra-checker-flags [mpirun args...]
    local variant=$1 flags=$2
    shift 2
    echo "mpi: $variant: mpirun -np 2 --bind-to $bind $* $bin --json"
    timeout 120 mpirun -np 2 --bind-to "$bind" "$@" "$bin" --json >"$work/$variant.json" \
        2>"$work/$variant.err"
    local rc=$?
    if [ "$rc" -ne 0 ]; then
        echo "mpi: $variant: mpirun exited $rc:"
        sed 's/^/    /' "$work/$variant.err" | tail -20
    fi
    # shellcheck disable=SC2086
    python3 tests/mpi/check_ranks.py "$variant" 2 "$work/$variant.json" "$work/$variant.err" \
        $flags >"$work/$variant.log"
    [ "$rc" -eq 0 ] && echo "mpi: $variant: mpirun exited 0: ok" >>"$work/$variant.log" ||
        echo "mpi: $variant: mpirun exited 0: FAILED: exit status $rc" >>"$work/$variant.log"
    cat "$work/$variant.log"
    tally "$work/$variant.log"
}

one_cpu=""
[ "$bind" = core ] && one_cpu="--one-cpu"
run real "$one_cpu"

# The CPUs the ranks were bound to, lowest first: the synthetic machine puts
# one on each node (pack:2 numa:1 pu:1, PU os indexes as listed).
pair=$(python3 -c "
import json, sys
try:
    r = json.load(open('$work/real.json'))['rank_info']
    c = sorted(int(x['affinity'].split(',')[0].split('-')[0]) for x in r)
    print('%d,%d' % (c[0], c[1]) if len(set(c)) == 2 else '')
except Exception:
    print('')
")
if [ -z "$pair" ]; then
    echo "mpi: synthetic: FAILED: the first run named no two distinct bound CPUs"
    failed=$((failed + 1))
else
    topo="synthetic:pack:2 numa:1 pu:1(indexes=$pair)"
    run synthetic "$one_cpu --nodes-differ" -x NXR_TOPOLOGY="$topo"
fi

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ] && [ "$passed" -gt 0 ]
