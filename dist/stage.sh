#!/bin/sh
# stage.sh --prefix PREFIX [--libdir DIR] [--includedir DIR] [--bindir DIR]
#          [--destdir DESTDIR]
# Installs what //dist built: headers in INCLUDEDIR/nxr/, libnxr.so.X.Y.Z
# with its libnxr.so.X and libnxr.so links, libnxr.a, the same for
# libnxr_omp, nxr.pc / nxr-static.pc / nxr-omp.pc in LIBDIR/pkgconfig, the
# CMake package in LIBDIR/cmake/nxr, the nxr command in BINDIR, the
# documentation (README.md, docs/*.md) in PREFIX/share/doc/nxr, where the
# installed headers' comments point, and the Python package in
# PREFIX/lib/python3/dist-packages/nxr (Debian's layout: on /usr/bin/python3's
# path for /usr; its _build.py names the release and the library's path
# relative to the package). Defaults:
# PREFIX/lib, PREFIX/include, PREFIX/bin. Paths written into the .pc and
# CMake files are the final ones; DESTDIR (for packaging) is only where the
# files go now. Run by tools/install.sh (`bazel run //dist:stage`) and by
# tests/dist, from the runfiles of //dist:stage.
set -eu
usage() {
    echo "usage: stage.sh --prefix PREFIX [--libdir DIR] [--includedir DIR] [--bindir DIR] [--destdir DIR]" >&2
    exit 2
}
prefix="" libdir="" includedir="" bindir="" destdir=""
while [ $# -gt 0 ]; do
    [ $# -ge 2 ] || usage
    case $1 in
    --prefix) prefix=$2 ;;
    --libdir) libdir=$2 ;;
    --includedir) includedir=$2 ;;
    --bindir) bindir=$2 ;;
    --destdir) destdir=$2 ;;
    *) usage ;;
    esac
    shift 2
done
[ -n "$prefix" ] || usage
for d in "$prefix" ${libdir:+"$libdir"} ${includedir:+"$includedir"} ${bindir:+"$bindir"}; do
    case $d in /*) ;; *) echo "stage.sh: $d: paths must be absolute" >&2 && exit 2 ;; esac
done
libdir=${libdir:-$prefix/lib}
includedir=${includedir:-$prefix/include}
bindir=${bindir:-$prefix/bin}

# The artefacts, in the runfiles tree of //dist:stage (bazel run, or a test
# that has it in its data).
root=""
for r in "${RUNFILES_DIR:-}" "$0.runfiles" "${TEST_SRCDIR:-}"; do
    if [ -n "$r" ] && [ -f "$r/nxr/dist/version.txt" ]; then
        root=$r/nxr
        break
    fi
done
[ -n "$root" ] || { echo "stage.sh: cannot find //dist's outputs (run it through bazel run //dist:stage)" >&2; exit 1; }
dist=$root/dist

version=$(cat "$dist/version.txt")
major=${version%%.*}
minor=${version#*.}
minor=${minor%%.*}

# In the .pc files, directories under the prefix are written as ${prefix}/...
# (so that pkg-config --define-prefix can relocate them).
under_prefix() {
    case $1 in "$prefix"/*) echo "\${prefix}${1#"$prefix"}" ;; *) echo "$1" ;; esac
}
pc_libdir=$(under_prefix "$libdir")
pc_includedir=$(under_prefix "$includedir")

installed="" # one path per line (paths may hold spaces)
put() { # mode source destination-file
    install -m "$1" "$2" "$3"
    installed="$installed$3
"
}

fill() { # template output
    sed -e "s|@PREFIX@|$prefix|g" -e "s|@LIBDIR@|$libdir|g" -e "s|@INCLUDEDIR@|$includedir|g" \
        -e "s|@PC_LIBDIR@|$pc_libdir|g" -e "s|@PC_INCLUDEDIR@|$pc_includedir|g" \
        -e "s|@VERSION@|$version|g" -e "s|@MAJOR@|$major|g" -e "s|@MINOR@|$minor|g" "$1" >"$2"
    chmod 0644 "$2"
    installed="$installed$2
"
}

shared() { # name: lib<name>.so.X.Y.Z, lib<name>.so.X -> it, lib<name>.so -> .so.X
    soname=$(readelf -d "$dist/lib$1.so" | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')
    if [ "$soname" != "lib$1.so.$major" ]; then
        echo "stage.sh: lib$1.so has soname '$soname', expected lib$1.so.$major" >&2
        exit 1
    fi
    put 0755 "$dist/lib$1.so" "$destdir$libdir/lib$1.so.$version"
    ln -sfn "lib$1.so.$version" "$destdir$libdir/lib$1.so.$major"
    ln -sfn "lib$1.so.$major" "$destdir$libdir/lib$1.so"
    put 0644 "$dist/lib$1.a" "$destdir$libdir/lib$1.a"
}

docdir=$prefix/share/doc/nxr
install -d "$destdir$includedir/nxr" "$destdir$libdir/pkgconfig" "$destdir$libdir/cmake/nxr" \
    "$destdir$bindir" "$destdir$docdir"
for h in "$dist"/include/nxr/*.h; do
    put 0644 "$h" "$destdir$includedir/nxr/$(basename "$h")"
done
shared nxr
shared nxr_omp
fill "$dist/nxr.pc.in" "$destdir$libdir/pkgconfig/nxr.pc"
fill "$dist/nxr-static.pc.in" "$destdir$libdir/pkgconfig/nxr-static.pc"
fill "$dist/nxr-omp.pc.in" "$destdir$libdir/pkgconfig/nxr-omp.pc"
fill "$dist/nxrConfig.cmake.in" "$destdir$libdir/cmake/nxr/nxrConfig.cmake"
fill "$dist/nxrConfigVersion.cmake.in" "$destdir$libdir/cmake/nxr/nxrConfigVersion.cmake"
put 0755 "$root/tools/nxr" "$destdir$bindir/nxr"
put 0644 "$root/README.md" "$destdir$docdir/README.md"
for d in "$root"/docs/*.md; do
    put 0644 "$d" "$destdir$docdir/$(basename "$d")"
done
# The Python binding: the library's path relative to the package (so that
# DESTDIR staging and a moved prefix keep it right) and the release.
pydir=$prefix/lib/python3/dist-packages/nxr
install -d "$destdir$pydir"
for f in "$root"/python/nxr/*.py; do
    put 0644 "$f" "$destdir$pydir/$(basename "$f")"
done
py_library=$(realpath -m -s --relative-to="$pydir" "$libdir/libnxr.so.$major")
sed -e "s|@VERSION@|$version|g" -e "s|@PY_LIBRARY@|$py_library|g" \
    "$root/python/nxr/_build.py.in" >"$destdir$pydir/_build.py"
chmod 0644 "$destdir$pydir/_build.py"
installed="$installed$destdir$pydir/_build.py
"
echo "stage.sh: nxr $version installed under $destdir$prefix (bytes, file):"
printf '%s' "$installed" | while IFS= read -r f; do stat -c '%10s  %n' "$f"; done
echo "  (and the links lib{nxr,nxr_omp}.so.$major and .so)"
