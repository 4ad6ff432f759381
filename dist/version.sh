#!/bin/sh
# version.sh base/nxr_version.h -- prints "major.minor.patch" from the
# NXR_VERSION_* macros, the one place the version is written.
set -eu
get() {
    v=$(sed -n "s/^#define NXR_VERSION_$1 \([0-9][0-9]*\)\$/\1/p" "$2")
    [ -n "$v" ] || { echo "version.sh: no NXR_VERSION_$1 in $2" >&2; exit 1; }
    echo "$v"
}
echo "$(get MAJOR "$1").$(get MINOR "$1").$(get PATCH "$1")"
