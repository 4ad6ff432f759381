#!/usr/bin/env bash
# tools/install.sh PREFIX [--libdir DIR] [--includedir DIR] [--bindir DIR] [--destdir DIR]
# Builds nxr's installable libraries with Bazel (//dist) and installs them:
#   PREFIX/include/nxr/*.h             #include <nxr/nxr.h>
#   PREFIX/lib/libnxr.so.X.Y.Z, .so.X, .so; libnxr.a; the same for libnxr_omp
#   PREFIX/lib/pkgconfig/nxr.pc, nxr-static.pc, nxr-omp.pc
#   PREFIX/lib/cmake/nxr/nxrConfig.cmake (nxr::nxr, nxr::nxr_static, nxr::omp)
#   PREFIX/bin/nxr                     the `nxr info` command
#   PREFIX/share/doc/nxr/*.md          README.md and docs/, which the headers cite
# The build is the one `bazel test //...` tests (tests/dist stage the same
# files with the same script, dist/stage.sh). PREFIX may be relative to the
# current directory. Prints each installed file and its size.
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
cd "$(dirname "$0")/.."
bazel run --ui_event_filters=-info --noshow_progress //dist:stage -- "${args[@]}"

