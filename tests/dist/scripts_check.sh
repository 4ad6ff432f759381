#!/usr/bin/env bash
# The user-facing scripts end to end, outside Bazel's sandbox (they run
# Bazel themselves, so they cannot run inside `bazel test`); a stage of
# .ci/run. tools/install.sh into a fresh prefix, then tests/dist/consumer.c
# built against it with pkg-config and run; tools/package.sh, its three
# .debs unpacked into a fresh root, checked for their files and Depends,
# and the consumer built against the unpacked libnxr-dev and run.
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
check "tools/install.sh PREFIX" bash tools/install.sh "$prefix"
version=$(PKG_CONFIG_PATH=$prefix/lib/pkgconfig pkg-config --modversion nxr 2>/dev/null)
consume_prefix() {
    local pc=$prefix/lib/pkgconfig
    # shellcheck disable=SC2046
    cc tests/dist/consumer.c -o "$work/c1" $(PKG_CONFIG_PATH=$pc pkg-config --cflags --libs nxr) &&
        LD_LIBRARY_PATH=$prefix/lib "$work/c1" "$version" &&
        "$prefix/bin/nxr" info >/dev/null
}
check "consumer against the installed prefix, and its bin/nxr" consume_prefix

debs=$work/debs
check "tools/package.sh OUTDIR" bash tools/package.sh "$debs"
root=$work/root
unpack() {
    local d n=0
    for d in "$debs"/*.deb; do
        dpkg-deb -x "$d" "$root" && n=$((n + 1))
    done
    [ "$n" -eq 3 ]
}
check "three .debs unpack" unpack
multiarch=$(gcc -print-multiarch)
lib=$root/usr/lib/$multiarch
has_files() {
    local major=${version%%.*}
    for f in usr/include/nxr/nxr.h "usr/lib/$multiarch/libnxr.so.$version" \
        "usr/lib/$multiarch/libnxr.so.$major" "usr/lib/$multiarch/libnxr.so" \
        "usr/lib/$multiarch/libnxr.a" "usr/lib/$multiarch/pkgconfig/nxr.pc" \
        "usr/lib/$multiarch/cmake/nxr/nxrConfig.cmake" usr/bin/nxr; do
        [ -e "$root/$f" ] || { echo "missing $f"; return 1; }
    done
    # Stripped: no debug sections left in the shared library.
    local sections depends
    sections=$(readelf -S "$lib/libnxr.so.$version")
    depends=$(dpkg-deb -f "$debs/libnxr${major}_${version}_"*.deb Depends)
    ! grep -q '\.debug_' <<<"$sections" && grep -q libhwloc <<<"$depends"
}
check "the packages hold the libraries, headers, pc, CMake files and the tool; Depends name hwloc" has_files
consume_root() {
    # shellcheck disable=SC2046
    cc tests/dist/consumer.c -o "$work/c2" $(PKG_CONFIG_SYSROOT_DIR=$root \
        PKG_CONFIG_PATH=$lib/pkgconfig pkg-config --cflags --libs nxr) &&
        LD_LIBRARY_PATH=$lib "$work/c2" "$version"
}
check "consumer against the unpacked libnxr-dev" consume_root
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
