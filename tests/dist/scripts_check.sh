#!/usr/bin/env bash
# The user-facing scripts end to end, outside Bazel's sandbox (they run
# Bazel themselves, so they cannot run inside `bazel test`); a stage of
# .ci/run. tools/install.sh into a fresh prefix, then tests/dist/consumer.c
# built against it with pkg-config and run, every example (examples/*.c)
# built the same way and one run; the installed libnxr.so loaded
# at run time with dlopen (tests/dist/dlopen_host.c) and with ctypes.CDLL
# from python3, plain and beside numpy (ctypes_host.py); the Python
# binding's tests (python/tests) against the installed package and the
# Python service example's short run; tools/package.sh, its four .debs
# unpacked into a fresh root, checked for their files and
# Depends, the consumer built against the unpacked libnxr-dev and run, the
# stripped libnxr.so loaded with ctypes and the unpacked python3-nxr
# imported; the pip wheel installed into a fresh venv and the binding's
# tests run there.
# Prints one "ok: ..." or "FAILED: ..." line per check and a count.
set -uo pipefail
cd "$(dirname "$0")/../.."
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
passed=0 failed=0
check() { # label command...
    local label=$1
    shift
    if "$@" >"$work/out" 2>&1; then
        passed=$((passed + 1))
        echo "ok: $label$(grep -h ': ok' "$work/out" | head -n 1 | sed 's/^/ -- /')"
    else
        failed=$((failed + 1))
        echo "FAILED: $label"
        sed 's/^/    /' "$work/out" | tail -n 20
    fi
}

prefix=$work/prefix
# Whether this tree's Bazel server runs (the pid file tools/install.sh reads).
bazel_server() {
    local f pid
    f=$HOME/.cache/bazel/_bazel_${USER:-$(id -un)}/$(printf %s "$(pwd -P)" | md5sum | cut -d' ' -f1)/server/server.pid.txt
    pid=$(cat "$f" 2>/dev/null) && [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null && echo running || echo none
}
server_before=$(bazel_server)
check "tools/install.sh PREFIX" bash tools/install.sh "$prefix"
cp "$work/out" "$work/install.out"
check "install.sh left the Bazel server as it found it ($server_before)" \
    test "$(bazel_server)" = "$server_before"
check "install.sh printed the LD_LIBRARY_PATH line for a prefix the linker does not search" \
    grep -qF "export LD_LIBRARY_PATH=$prefix/lib" "$work/install.out"
version=$(PKG_CONFIG_PATH=$prefix/lib/pkgconfig pkg-config --modversion nxr 2>/dev/null)
consume_prefix() {
    local pc=$prefix/lib/pkgconfig
    # shellcheck disable=SC2046
    cc tests/dist/consumer.c -o "$work/c1" $(PKG_CONFIG_PATH=$pc pkg-config --cflags --libs nxr) &&
        LD_LIBRARY_PATH=$prefix/lib "$work/c1" "$version" &&
        "$prefix/bin/nxr" info >/dev/null
}
check "consumer against the installed prefix, and its bin/nxr" consume_prefix
# Every example builds against the installed headers and library alone
# (examples/*.c include only <nxr/nxr.h> and files beside them; mpi_ranks
# with mpicc); the service example runs and checks its own result.
examples_prefix() {
    local pc=$prefix/lib/pkgconfig flags ex
    flags=$(PKG_CONFIG_PATH=$pc pkg-config --cflags --libs nxr) || return 1
    for ex in service span_decode; do
        # shellcheck disable=SC2086
        cc -std=c11 "examples/$ex.c" -o "$work/ex_$ex" $flags -pthread -lm || return 1
    done
    # shellcheck disable=SC2086
    cc -std=c11 examples/metrics_http.c examples/metrics_server.c -o "$work/ex_metrics_http" \
        $flags -pthread || return 1
    # shellcheck disable=SC2086
    cc -std=c11 examples/attach_pool.c examples/host_pool.c examples/pool_executor.c \
        -o "$work/ex_attach_pool" $flags -pthread || return 1
    if command -v mpicc >/dev/null; then
        # shellcheck disable=SC2086
        mpicc -std=c11 examples/mpi_ranks.c -o "$work/ex_mpi_ranks" $flags -lm || return 1
    else
        echo "no mpicc here (tools/setup.sh installs it): mpi_ranks not built"
        return 1
    fi
    LD_LIBRARY_PATH=$prefix/lib "$work/ex_service"
}
check "every example built with cc \$(pkg-config --cflags --libs nxr) against the prefix; the service example run" examples_prefix
# Loaded at run time with nothing set up for it (tests/dist/dlopen_host.c,
# ctypes_host.py): no GLIBC_TUNABLES, no LD_PRELOAD, no library path.
clean_env=(env -u GLIBC_TUNABLES -u LD_PRELOAD -u LD_LIBRARY_PATH)
dlopen_prefix() {
    local so=$prefix/lib/libnxr.so.${version%%.*}
    cc -std=c11 tests/dist/dlopen_host.c -o "$work/dlopen_host" -ldl &&
        "${clean_env[@]}" "$work/dlopen_host" "$so"
}
check "dlopen of the installed libnxr.so, twice, runtimes created and destroyed, dlclose, no thread left" dlopen_prefix
# The interpreter that has Debian's python3-numpy (tools/setup.sh installs it).
numpy_python=
for py in python3 /usr/bin/python3; do
    if "$py" -c 'import numpy' 2>/dev/null; then
        numpy_python=$py
        break
    fi
done
ctypes_prefix() { # mode [python]
    "${clean_env[@]}" "${2:-python3}" tests/dist/ctypes_host.py \
        "$prefix/lib/libnxr.so.${version%%.*}" "$1"
}
check "ctypes.CDLL of the installed libnxr.so in a fresh python3" ctypes_prefix plain
numpy_ctypes() {
    [ -n "$numpy_python" ] || { echo "no python3 here imports numpy (tools/setup.sh installs python3-numpy)"; return 1; }
    ctypes_prefix numpy-before "$numpy_python" && ctypes_prefix numpy-after "$numpy_python"
}
check "ctypes.CDLL of the installed libnxr.so after and before importing numpy" numpy_ctypes
check "install.sh printed the PYTHONPATH line for the Python package" \
    grep -qF "export PYTHONPATH=$prefix/lib/python3/dist-packages" "$work/install.out"
# The Python binding's tests (python/tests), against the installed package
# and library: the user guide's PYTHONPATH line and nothing else set, Debian's
# interpreter (the one with python3-numpy).
pydir=$prefix/lib/python3/dist-packages
python_tests() {
    [ -n "$numpy_python" ] || { echo "no python3 here imports numpy (tools/setup.sh installs python3-numpy)"; return 1; }
    "${clean_env[@]}" PYTHONDONTWRITEBYTECODE=1 PYTHONPATH="$pydir" "$numpy_python" -m unittest discover -s python/tests 2>&1 &&
        echo "python tests: ok"
}
check "the Python binding's tests (python/tests) against the installed package" python_tests
python_service() {
    [ -n "$numpy_python" ] || return 1
    "${clean_env[@]}" PYTHONPATH="$pydir" "$numpy_python" examples/python_service.py --short --json \
        >"$work/service.json" &&
        "$numpy_python" -c 'import json, sys; r = json.load(open(sys.argv[1])); sys.exit(0 if r["outputs_match"] else 1)' \
            "$work/service.json" && echo "python_service: ok, outputs match numpy's"
}
check "examples/python_service.py --short: nxr and numpy paths, outputs match" python_service
# The language model from Python: continuous batching on a serving thread per
# domain makes the same tokens as one sequence a step (tokens_match).
python_llm() {
    [ -n "$numpy_python" ] || return 1
    "${clean_env[@]}" PYTHONPATH="$pydir" "$numpy_python" examples/python_llm.py --short --json \
        >"$work/llm.json" &&
        "$numpy_python" -c 'import json, sys; r = json.load(open(sys.argv[1])); sys.exit(0 if r["tokens_match"] and r["tokens"] > 0 else 1)' \
            "$work/llm.json" && echo "python_llm: ok, batched tokens equal one sequence a step's"
}
check "examples/python_llm.py --short: batched equals one sequence a step" python_llm

debs=$work/debs
check "tools/package.sh OUTDIR" bash tools/package.sh "$debs"
root=$work/root
unpack() {
    local d n=0
    for d in "$debs"/*.deb; do
        dpkg-deb -x "$d" "$root" && n=$((n + 1))
    done
    [ "$n" -eq 4 ]
}
check "four .debs unpack" unpack
multiarch=$(gcc -print-multiarch)
lib=$root/usr/lib/$multiarch
has_files() {
    local major=${version%%.*}
    for f in usr/include/nxr/nxr.h "usr/lib/$multiarch/libnxr.so.$version" \
        "usr/lib/$multiarch/libnxr.so.$major" "usr/lib/$multiarch/libnxr.so" \
        "usr/lib/$multiarch/libnxr.a" "usr/lib/$multiarch/pkgconfig/nxr.pc" \
        "usr/lib/$multiarch/cmake/nxr/nxrConfig.cmake" usr/bin/nxr \
        usr/lib/python3/dist-packages/nxr/__init__.py usr/lib/python3/dist-packages/nxr/_build.py; do
        [ -e "$root/$f" ] || { echo "missing $f"; return 1; }
    done
    # Stripped: no debug sections left in the shared library.
    local sections depends
    sections=$(readelf -S "$lib/libnxr.so.$version")
    depends=$(dpkg-deb -f "$debs/libnxr${major}_${version}_"*.deb Depends)
    ! grep -q '\.debug_' <<<"$sections" && grep -q libhwloc <<<"$depends"
}
check "the packages hold the libraries, headers, pc, CMake files, the tool and the Python package; Depends name hwloc" has_files
consume_root() {
    # shellcheck disable=SC2046
    cc tests/dist/consumer.c -o "$work/c2" $(PKG_CONFIG_SYSROOT_DIR=$root \
        PKG_CONFIG_PATH=$lib/pkgconfig pkg-config --cflags --libs nxr) &&
        LD_LIBRARY_PATH=$lib "$work/c2" "$version"
}
check "consumer against the unpacked libnxr-dev" consume_root
ctypes_root() {
    "${clean_env[@]}" python3 tests/dist/ctypes_host.py "$lib/libnxr.so.${version%%.*}" plain
}
check "ctypes.CDLL of the packaged (stripped) libnxr.so" ctypes_root
# python3-nxr: the package in Debian's directory finds the packaged library
# through the relative path its _build.py holds (no variable but the
# unpacked root's directory on PYTHONPATH).
python_root() {
    [ -n "$numpy_python" ] || return 1
    "${clean_env[@]}" PYTHONPATH="$root/usr/lib/python3/dist-packages" "$numpy_python" -c '
import os, sys, numpy as np, nxr
assert os.path.realpath(nxr.library_path).startswith(sys.argv[1]), nxr.library_path
with nxr.Runtime(ignore_env=True) as rt:
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    assert np.array_equal(rt.context(rt.domains[0].id).sgemm(a, a.T.copy()), a @ a.T)
print("python_root: ok, nxr", nxr.__version__, "from", nxr.library_path)' "$(readlink -f "$lib")"
}
check "the packaged python3-nxr imports and loads the packaged library" python_root
# The pip wheel (tools/wheel.py): installed with pip into a fresh virtual
# environment (Debian's numpy visible through --system-site-packages, nothing
# else set), it loads its own copy of libnxr.so, and the binding's tests pass
# there.
wheel_venv() {
    [ -n "$numpy_python" ] || { echo "no python3 here imports numpy (tools/setup.sh installs python3-numpy)"; return 1; }
    local whl venv=$work/venv
    whl=$(ls "$debs"/nxr-"$version"-py3-none-*.whl) || return 1
    "$numpy_python" -m venv --system-site-packages "$venv" &&
        "${clean_env[@]}" "$venv/bin/python" -m pip install --quiet --no-index --no-deps \
            --disable-pip-version-check "$whl" &&
        (cd "$work" && "${clean_env[@]}" "$venv/bin/python" -c '
import os, sys, nxr
here = os.path.dirname(os.path.realpath(nxr.__file__))
assert here.startswith(os.path.realpath(sys.argv[1])), here
assert os.path.dirname(os.path.realpath(nxr.library_path)) == here, nxr.library_path
with nxr.Runtime(ignore_env=True) as rt:
    assert rt.domains
print("wheel: nxr", nxr.__version__, "from", nxr.library_path)' "$venv") &&
        "${clean_env[@]}" PYTHONDONTWRITEBYTECODE=1 "$venv/bin/python" -m unittest discover \
            -s python/tests 2>&1 && echo "wheel: ok, the binding's tests pass in the venv"
}
check "pip installs the wheel into a fresh venv; it loads its own libnxr.so and the binding's tests pass" wheel_venv
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
