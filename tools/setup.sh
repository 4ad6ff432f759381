#!/usr/bin/env bash
# Installs what nxr needs on a fresh Debian machine (root, or sudo without a
# password). Installs only what is missing; `apt-get update` runs once, and
# only if something is missing. Safe to run again.
set -euo pipefail

PACKAGES=(
    bazel-bootstrap   # Bazel 4.2.3, needs no download of its own
    gcc g++ libc6-dev # the C toolchain (g++: the C++ header and consumer tests, bench/forkjoin's oneTBB peer)
    clang llvm libclang-rt-14-dev libomp-14-dev  # sanitizers, libFuzzer, bench/forkjoin's libomp peer
    libtbb-dev            # bench/forkjoin's oneTBB peer
    libhwloc-dev hwloc    # topology discovery, lstopo
    libnuma-dev numactl   # memory policy, numactl
    libjemalloc-dev       # per-node arenas (linked privately)
    libopenblas-dev       # the GEMM provider
    libcriterion-dev      # tests
    python3               # the JSON checks of `nxr info --json`
    universal-ctags       # tools/definitions_check.sh: every NXR_API function has a definition ctags finds
    python3-numpy         # tests/dist: ctypes.CDLL of libnxr.so beside numpy's BLAS
    python3-venv python3-pip  # tests/dist: the pip wheel installed into a fresh virtual environment
    cmake pkg-config      # tests/dist: consumers of the installed nxr (find_package, pkg-config)
    libudev-dev           # `pkg-config --static` of hwloc names -ludev (Debian's hwloc.pc)
    qemu-system-x86 busybox-static cpio  # multi-node VMs (tools/vm_test.sh, numa-vm)
    openmpi-bin libopenmpi-dev           # one runtime per MPI rank (examples/mpi_ranks, tools/mpi_test.sh)
)

missing=()
for p in "${PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ "${#missing[@]}" -eq 0 ]; then
    echo "setup: all ${#PACKAGES[@]} packages present"
    exit 0
fi
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo -n"
echo "setup: installing ${missing[*]}"
$SUDO apt-get update -q
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
