#!/bin/sh
# link_shared.sh OUT BASENAME NODE VERSION_FILE CC NM -- INPUTS...
# Links nxr's PIC objects (and bundled archives, link flags) into OUT, a
# shared library whose soname is BASENAME.<major> (major from VERSION_FILE,
# written from base/nxr_version.h). Exported: the default-visibility nxr_*
# functions (NXR_API) under the symbol version NODE_<major>; hidden:
# everything else, any bundled archive included (--exclude-libs; today there
# is none: libnxr.so's graph is built without jemalloc, see defs.bzl).
# -z defs: nothing may be left undefined that no listed library provides. Fails if OUT exports anything but nxr_*.
set -eu
out=$1 base=$2 node=$3 version_file=$4 cc=$5 nm=$6
shift 6
[ "$1" = "--" ] && shift
version=$(cat "$version_file")
major=${version%%.*}
script=$out.version-script
# One version node per major: a host records nxr_x@NXR_0, so two majors of
# nxr in one process bind each caller to its own.
cat >"$script" <<SCRIPT
${node}_${major} {
  global: nxr_*;
  local: *;
};
SCRIPT
"$cc" -shared -o "$out" \
    -Wl,-soname,"$base.$major" \
    -Wl,--version-script="$script" \
    -Wl,--exclude-libs,ALL \
    -Wl,-z,defs -Wl,-z,relro -Wl,-z,now \
    -Wl,--as-needed \
    "$@"
rm -f "$script"
bad=$("$nm" -D --defined-only "$out" | awk 'NF >= 3 {print $3}' | sed 's/@.*//' |
    grep -v "^${node}_${major}\$" | grep -Ev '^nxr_[a-z0-9]' | grep -Ev '^$' || true)
internal=$("$nm" -D --defined-only "$out" | awk 'NF >= 3 {print $3}' | grep -E '^nxr_(_|je_)' || true)
if [ -n "$bad$internal" ]; then
    echo "link_shared.sh: $out exports symbols outside the public API:" >&2
    echo "$bad$internal" >&2
    rm -f "$out"
    exit 1
fi
