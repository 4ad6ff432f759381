#!/bin/sh
# privatize.sh IN.a OUT.a -- turns Debian's libjemalloc_pic.a into a copy of
# jemalloc that is private to nxr.
#
# Why: Debian's jemalloc defines unprefixed malloc/free/... Linked as it is,
# it would become the allocator of the whole host process, and nxr is a
# library embedded in other people's services. So nxr links a copy in which
#   1. the C++ operators (jemalloc_cpp) are dropped: nothing of nxr uses them
#      and they would drag in libstdc++;
#   2. every object is combined into one relocatable object (ld -r), so
#      jemalloc's cross-file references are resolved inside it;
#   3. the entry points nxr calls are renamed to nxr_je_<name>
#      (objcopy --redefine-syms) and every other global symbol -- malloc,
#      free, posix_memalign, malloc_conf, the je_* internals -- is made local
#      (objcopy --keep-global-symbols), so nothing in the host can bind to
#      them and they cannot collide with another jemalloc in the process.
# The host's malloc stays whatever the host links (glibc's, or its own
# jemalloc); tests/alloc/jemalloc_private_test.c checks it.
set -eu
in=$1
out=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
case $out in /*) ;; *) out=$PWD/$out ;; esac
case $in in /*) ;; *) in=$PWD/$in ;; esac
cd "$work"
ar x "$in"
rm -f jemalloc_cpp.pic.o
ld -r -o combined.o ./*.pic.o
# The jemalloc API nxr uses (see alloc/internal/je.h).
for s in mallocx dallocx sdallocx nallocx sallocx mallctl mallctlnametomib mallctlbymib; do
    echo "$s nxr_je_$s" >>rename.txt
    echo "nxr_je_$s" >>keep.txt
done
objcopy --redefine-syms=rename.txt combined.o renamed.o
objcopy --keep-global-symbols=keep.txt renamed.o private.o
# Refuse to produce an archive that still exports an allocator symbol.
if nm -g --defined-only private.o | awk '{print $3}' | grep -qv '^nxr_je_'; then
    echo "privatize.sh: unexpected global symbols left:" >&2
    nm -g --defined-only private.o | awk '{print $3}' | grep -v '^nxr_je_' >&2
    exit 1
fi
rm -f "$out"
ar rcs "$out" private.o
