#!/usr/bin/env bash
# tools/install.sh PREFIX [--libdir DIR] [--includedir DIR] [--bindir DIR] [--destdir DIR]
# Builds nxr's installable libraries with Bazel (//dist) and installs them:
#   PREFIX/include/nxr/*.h             #include <nxr/nxr.h>
#   PREFIX/lib/libnxr.so.X.Y.Z, .so.X, .so; libnxr.a; the same for libnxr_omp
#   PREFIX/lib/pkgconfig/nxr.pc, nxr-static.pc, nxr-omp.pc
#   PREFIX/lib/cmake/nxr/nxrConfig.cmake (nxr::nxr, nxr::nxr_static, nxr::omp)
#   PREFIX/bin/nxr                     the `nxr info` command
#   PREFIX/share/doc/nxr/*.md          README.md and docs/, which the headers cite
#   PREFIX/lib/python3/dist-packages/nxr   the Python binding (import nxr)
# The build is the one `bazel test //...` tests (tests/dist stage the same
# files with the same script, dist/stage.sh). PREFIX may be relative to the
# current directory. Prints each installed file and its size, then, when
# LIBDIR is not one the dynamic linker searches, the LD_LIBRARY_PATH line a
# host needs to run (nxr.pc carries no rpath: see below), and when the
# Python package's directory is not on python3's path, the PYTHONPATH line.
#
# It leaves no process behind: the Bazel server it started is shut down at
# the end, unless one was already running for this tree before (a
# developer's own server, maybe building right now: not ours to stop).
# Not --batch: a batch client with a server running for the same output
# base kills that server (the startup options differ), which is exactly
# the caller's server this must leave alone.
set -euo pipefail
usage() {
    sed -n '2p' "$0" | sed 's/^# /usage: /' >&2
    exit 2
}
[ $# -ge 1 ] || usage
case $1 in -*) usage ;; esac
abs() { case $1 in /*) echo "$1" ;; *) echo "$PWD/$1" ;; esac }
prefix=$(abs "$1")
shift
args=(--prefix "$prefix")
while [ $# -gt 0 ]; do
    [ $# -ge 2 ] || usage
    case $1 in
    --libdir | --includedir | --bindir | --destdir) args+=("$1" "$(abs "$2")") ;;
    *) usage ;;
    esac
    shift 2
done
libdir=$prefix/lib
destdir=""
for ((i = 2; i < ${#args[@]}; i += 2)); do
    case ${args[i]} in
    --libdir) libdir=${args[i + 1]} ;;
    --destdir) destdir=${args[i + 1]} ;;
    esac
done
cd "$(dirname "$0")/.."

# Bazel's server for this tree runs if its pid file names a live process
# (the output base is the default one, $HOME/.cache/bazel/_bazel_$USER/
# md5(tree); .bazelrc sets no startup option that moves it).
server_pid_file=${HOME:-~}/.cache/bazel/_bazel_${USER:-$(id -un)}/$(printf %s "$(pwd -P)" | md5sum | cut -d' ' -f1)/server/server.pid.txt
server_running() {
    local pid
    pid=$(cat "$server_pid_file" 2>/dev/null) && [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null
}
if ! server_running; then
    # Ours: stopped on the way out, success or not (bazel shutdown waits
    # for the server to exit; it returns at once when none runs).
    trap 'bazel shutdown 2>/dev/null || true' EXIT
fi
bazel run --ui_event_filters=-info --noshow_progress //dist:stage -- "${args[@]}"

# How a host finds libnxr.so.<major> at run time. Not an rpath in nxr.pc:
# the same .pc serves /usr (packages, where Debian forbids one), DESTDIR
# staging, and `pkg-config --define-prefix` after the tree was moved, where
# a baked path would be wrong; a host that wants one adds
# -Wl,-rpath,$(pkg-config --variable=libdir nxr) itself.
if [ -z "$destdir" ]; then
    real=$(readlink -f "$libdir")
    searched=0
    while IFS= read -r d; do
        [ "$(readlink -f "$d")" = "$real" ] && searched=1
    done < <(ldconfig -v -N 2>/dev/null | sed -n 's/^\([^[:space:]][^:]*\):.*/\1/p')
    if [ $searched -eq 1 ]; then
        echo "install.sh: $libdir is searched by the dynamic linker; run ldconfig (as root) once."
    else
        echo "install.sh: $libdir is not searched by the dynamic linker. To run a host linked"
        echo "against libnxr.so, either"
        echo "  export LD_LIBRARY_PATH=$libdir\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH}"
        echo "or link it with -Wl,-rpath,$libdir (or add $libdir to /etc/ld.so.conf.d and run ldconfig)."
    fi
    # The Python package finds its library by itself (its _build.py); the
    # interpreter needs to find the package. Debian's python3 searches
    # /usr/lib/python3/dist-packages, so a /usr install needs nothing.
    pydir=$prefix/lib/python3/dist-packages
    py=/usr/bin/python3
    [ -x "$py" ] || py=python3
    if "$py" -c 'import sys; sys.exit(0 if sys.argv[1] in sys.path else 1)' "$pydir" 2>/dev/null; then
        echo "install.sh: the Python package nxr is in $pydir, on $py's path."
    else
        echo "install.sh: the Python package nxr is in $pydir. To import it,"
        echo "  export PYTHONPATH=$pydir\${PYTHONPATH:+:\$PYTHONPATH}"
    fi
fi
