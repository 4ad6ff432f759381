#!/usr/bin/env bash
# vm_test.sh -- runs nxr's multi-node memory tests inside a two-node NUMA VM.
#
#     tools/vm_test.sh                 # every test tagged "numa_vm"
#     tools/vm_test.sh //tests/alloc:placement_test //tests/alloc:pool_test
#
# Builds each target with Bazel, then boots it in a throw-away QEMU VM with
# two NUMA nodes (2 CPUs and 512 MiB each) through numa-vm (default
# /work/shared/tools/numa-vm; override with NUMA_VM=/path/to/numa-vm) and
# exits with the first failing status. Inside the VM the node-1 placement
# test must run, not skip (NXR_TEST_NEED_NODE1=1). Under TCG a run takes
# about 10-40 s per target; output is Criterion's one line per test.
set -euo pipefail

cd "$(dirname "$0")/.."
NUMA_VM=${NUMA_VM:-/work/shared/tools/numa-vm}
[[ -x $NUMA_VM ]] || { echo "vm_test.sh: numa-vm not found at $NUMA_VM (set NUMA_VM)" >&2; exit 2; }

targets=("$@")
if ((${#targets[@]} == 0)); then
    mapfile -t targets < <(bazel query 'attr(tags, "numa_vm", tests(//...))' 2>/dev/null)
    ((${#targets[@]})) || { echo "vm_test.sh: no test is tagged numa_vm" >&2; exit 2; }
fi

bazel build --color=no --curses=no "${targets[@]}" >/dev/null 2>&1 ||
    bazel build "${targets[@]}"
bin_dir=$(bazel info bazel-bin 2>/dev/null)

status=0
for t in "${targets[@]}"; do
    rel=${t#//}
    bin=$bin_dir/${rel%%:*}/${rel##*:}
    echo "== $t in a 2-node VM"
    "$NUMA_VM" --nodes 2 --cpus-per-node 2 --env NXR_TEST_NEED_NODE1=1 -- "$bin" --verbose=1 ||
        { rc=$?; echo "== $t: FAILED (status $rc)"; ((status)) || status=$rc; }
done
exit "$status"
