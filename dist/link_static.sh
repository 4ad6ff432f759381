#!/bin/sh
# link_static.sh OUT LD OBJCOPY NM AR -- OBJECTS... --archives ARCHIVES...
# Makes OUT, an archive of ONE relocatable object holding nxr's objects and
# the members of the bundled archives they need (nxr's private jemalloc).
# Within one object the cross-file references are resolved, so the hidden
# symbols (nxr__*, -fvisibility=hidden) and everything the bundled archives
# define (nxr_je_*) can be made local: a host linking OUT sees only the
# public nxr_* API, never je_*, malloc or nxr__*. Fails otherwise.
set -eu
out=$1 ld=$2 objcopy=$3 nm=$4 ar=$5
shift 5
[ "$1" = "--" ] && shift
objects=""
archives=""
in_archives=0
for f in "$@"; do
    if [ "$f" = "--archives" ]; then
        in_archives=1
    elif [ $in_archives -eq 1 ]; then
        archives="$archives $f"
    else
        objects="$objects $f"
    fi
done
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# shellcheck disable=SC2086 # word splitting is wanted: the lists are paths without spaces
"$ld" -r -o "$work/combined.o" $objects $archives
: >"$work/bundled.txt"
for a in $archives; do
    "$nm" -g --defined-only "$a" | awk 'NF == 3 {print $3}' >>"$work/bundled.txt"
done
# (objcopy fails, silently, on an empty symbol file.)
localize=""
[ -s "$work/bundled.txt" ] && localize="--localize-symbols=$work/bundled.txt"
# shellcheck disable=SC2086 # $localize is one word or none
"$objcopy" --localize-hidden $localize "$work/combined.o" "$work/nxr.o"
bad=$("$nm" -g --defined-only "$work/nxr.o" | awk 'NF == 3 {print $3}' |
    grep -Ev '^nxr_[a-z0-9]' || true)
bad="$bad$("$nm" -g --defined-only "$work/nxr.o" | awk 'NF == 3 {print $3}' |
    grep -E '^nxr_(_|je_)' || true)"
if [ -n "$bad" ]; then
    echo "link_static.sh: $out would define global symbols outside the public API:" >&2
    echo "$bad" >&2
    exit 1
fi
rm -f "$out"
"$ar" rcsD "$out" "$work/nxr.o"
