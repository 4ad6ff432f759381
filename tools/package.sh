#!/usr/bin/env bash
# tools/package.sh [OUTDIR] -- builds Debian packages of nxr into OUTDIR
# (default: the current directory), from the same staging as
# tools/install.sh, with /usr as the prefix and the multiarch libdir:
#   libnxr<major>_<version>_<arch>.deb  libnxr.so.<major>, libnxr_omp.so.<major>
#   libnxr-dev_<version>_<arch>.deb     headers, .so links, .a, .pc, CMake,
#                                       /usr/share/doc/nxr (the docs the headers cite)
#   nxr-tools_<version>_<arch>.deb      /usr/bin/nxr
#   python3-nxr_<version>_<arch>.deb    /usr/lib/python3/dist-packages/nxr (import nxr;
#                                       it loads libnxr.so.<major> of libnxr<major>)
#   nxr-<version>-py3-none-<platform>.whl  the binding with its own libnxr.so.<major>,
#                                       for pip (tools/wheel.py)
# Binaries are stripped as Debian's tools strip them (debug info removed;
# the .a keeps its symbol table). Depends are read from the ELF files:
# each NEEDED library's Debian package. Prints each package and its size.
set -euo pipefail
abs() { case $1 in /*) echo "$1" ;; *) echo "$PWD/$1" ;; esac }
out=$(abs "${1:-.}")
cd "$(dirname "$0")/.."
arch=$(dpkg --print-architecture)
multiarch=$(gcc -print-multiarch)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
root=$work/root
libdir=/usr/lib/$multiarch
bash tools/install.sh /usr --libdir "$libdir" --destdir "$root" >/dev/null
version=$(sed -n 's/^Version: //p' "$root$libdir/pkgconfig/nxr.pc")
major=${version%%.*}

strip --strip-unneeded --remove-section=.comment --remove-section=.note \
    "$root$libdir"/libnxr*.so."$version" "$root/usr/bin/nxr"
strip --strip-debug "$root$libdir"/libnxr*.a

owner() { # path: the package that installed it (dpkg may know it by its
    # /lib or /usr/lib name, or only by its target behind alternatives)
    local p real=$(readlink -f "$1")
    for p in "$1" "$real" "${real#/usr}" "/usr$1"; do
        dpkg -S "$p" 2>/dev/null | head -n 1 | cut -d: -f1 && return 0
    done
    echo "package.sh: no package owns $1" >&2
    return 1
}

depends_of() { # ELF files...: "pkg, pkg" of their NEEDED libraries, nxr's own left out
    local f lib path pkgs=""
    for f in "$@"; do
        for lib in $(readelf -d "$f" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p'); do
            case $lib in libnxr*) continue ;; esac
            path=$(ldconfig -p | awk -v l="$lib" '$1 == l && /x86-64|64bit/ {print $NF; exit}')
            [ -n "$path" ] || path=$(ldconfig -p | awk -v l="$lib" '$1 == l {print $NF; exit}')
            [ -n "$path" ] || { echo "package.sh: $f needs $lib, which is not installed" >&2; exit 1; }
            pkgs="$pkgs $(owner "$path")"
        done
    done
    echo "$pkgs" | tr ' ' '\n' | sed '/^$/d' | sort -u | paste -sd, - | sed 's/,/, /g'
}

# pkg description depends files-relative-to-root...
build() {
    local pkg=$1 desc=$2 deps=$3
    shift 3
    local dir=$work/$pkg
    mkdir -p "$dir/DEBIAN"
    (cd "$root" && cp -a --parents "$@" "$dir/")
    local size
    size=$(du -sk --exclude=DEBIAN "$dir" | cut -f1)
    cat >"$dir/DEBIAN/control" <<CONTROL
Package: $pkg
Version: $version
Architecture: $arch
Maintainer: nxr developers <nxr@localhost>
Section: libs
Priority: optional
Installed-Size: $size
Depends: $deps
Description: $desc
 nxr is a NUMA-aware executor runtime for servers, written in C11: a
 service opens one context per socket and runs its compute on worker teams
 that stay on their socket and use memory from their own NUMA node.
CONTROL
    if [ "$pkg" = "libnxr$major" ]; then
        echo "activate-noawait ldconfig" >"$dir/DEBIAN/triggers"
        printf 'libnxr %s libnxr%s (>= %s)\nlibnxr_omp %s libnxr%s (>= %s)\n' \
            "$major" "$major" "$version" "$major" "$major" "$version" >"$dir/DEBIAN/shlibs"
    fi
    dpkg-deb --root-owner-group --build "$dir" "$out/${pkg}_${version}_${arch}.deb" >/dev/null
    printf '  %10s  %s\n' "$(stat -c %s "$out/${pkg}_${version}_${arch}.deb")" \
        "$out/${pkg}_${version}_${arch}.deb"
}

rel=${libdir#/}
mkdir -p "$out"
echo "package.sh: nxr $version, $arch (bytes, package):"
build "libnxr$major" "NUMA-aware executor runtime (shared libraries)" \
    "$(depends_of "$root$libdir"/libnxr*.so."$version")" \
    "$rel/libnxr.so.$version" "$rel/libnxr.so.$major" \
    "$rel/libnxr_omp.so.$version" "$rel/libnxr_omp.so.$major"
build libnxr-dev "NUMA-aware executor runtime (development files)" \
    "libnxr$major (= $version), libhwloc-dev, libnuma-dev, libopenblas-dev" \
    usr/include/nxr "$rel/libnxr.so" "$rel/libnxr_omp.so" "$rel/libnxr.a" "$rel/libnxr_omp.a" \
    "$rel/pkgconfig" "$rel/cmake" usr/share/doc/nxr
build nxr-tools "NUMA-aware executor runtime (the nxr command)" \
    "$(depends_of "$root/usr/bin/nxr")" usr/bin/nxr
# Pure Python over ctypes, but it names the multiarch path of its library
# (_build.py), so it is built per architecture like the library. numpy is
# optional (without it: runtimes, contexts, bind; no arrays or kernels).
build python3-nxr "NUMA-aware executor runtime (Python binding)" \
    "libnxr$major (= $version), python3" usr/lib/python3/dist-packages/nxr
# The pip wheel: the same binding, with its own stripped libnxr.so beside it.
wheel=$(python3 tools/wheel.py "$root" "$libdir" "$version" "$out")
printf '  %10s  %s\n' "$(stat -c %s "$wheel")" "$wheel"
