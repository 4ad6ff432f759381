#!/usr/bin/env bash
# The installed headers stand alone: each one, and the umbrella <nxr/nxr.h>,
# compiles by itself with only -I<include dir>, as C99 and C11 with -Wall
# -Wextra -pedantic -Werror (C11 with and without _GNU_SOURCE, which adds the
# cpu_set_t helpers; C99 is what a host that has not moved on builds with,
# and rejects a typedef declared twice) and as C++17 both plainly (the headers' own extern "C") and
# inside an extern "C" block; each can be included twice (guards), and the
# C++ view of a few declarations is the C one (no C++-only surprises).
set -euo pipefail
inc=$TEST_SRCDIR/nxr/dist/include
work=$TEST_TMPDIR
checks=0
fail() {
    echo "headers_test: FAILED: $*" >&2
    exit 1
}
cflags=(-std=c11 -Wall -Wextra -pedantic -Werror -Wstrict-prototypes -Wmissing-prototypes -I"$inc")
c99flags=(-std=c99 "${cflags[@]:1}")
cxxflags=(-std=c++17 -Wall -Wextra -pedantic -Werror -I"$inc")

compile() { # label source compiler-and-flags...
    local log=$work/compile.log
    if ! "${@:3}" -fsyntax-only - <<<"$2" 2>"$log"; then
        cat "$log" >&2
        fail "$1"
    fi
    checks=$((checks + 1))
}

headers=$(cd "$inc/nxr" && ls nxr*.h)
[ -n "$headers" ] || fail "no headers in $inc/nxr"
nl=$'\n'
for h in $headers; do
    compile "$h as C11 -pedantic" "#include <nxr/$h>$nl#include <nxr/$h>" cc "${cflags[@]}" -x c
    compile "$h as C99 -pedantic" "#include <nxr/$h>$nl#include <nxr/$h>" cc "${c99flags[@]}" -x c
    compile "$h as C11 with _GNU_SOURCE" "#define _GNU_SOURCE$nl#include <nxr/$h>" \
        cc "${cflags[@]}" -x c
    compile "$h as C++17" "#include <nxr/$h>" c++ "${cxxflags[@]}" -x c++
    compile "$h as C++17 inside extern \"C\"" "extern \"C\" {$nl#include <nxr/$h>$nl}" \
        c++ "${cxxflags[@]}" -x c++
done

# The umbrella declares the whole API, the cpu_set_t helpers with
# _GNU_SOURCE, with C linkage in C++.
cat >"$work/umbrella.cc" <<'CC'
#define _GNU_SOURCE 1
#include <nxr/nxr.h>
#include <type_traits>
static_assert(std::is_same<decltype(&nxr_version), unsigned (*)()>::value, "nxr_version");
static_assert(std::is_same<decltype(&nxr_cpuset_from_cpu_set),
                           int (*)(const cpu_set_t *, size_t, hwloc_bitmap_t *)>::value,
              "nxr_cpuset_from_cpu_set");
static_assert(NXR_VERSION == NXR_VERSION_ENCODE(NXR_VERSION_MAJOR, NXR_VERSION_MINOR,
                                                NXR_VERSION_PATCH), "version macros");
extern "C" int nxr_runtime_create(const struct nxr_runtime_opts *, nxr_runtime_t **);
CC
compile "the umbrella's declarations seen from C++" "$(cat "$work/umbrella.cc")" \
    c++ "${cxxflags[@]}" -x c++
# Without _GNU_SOURCE, cpu_set_t does not exist and neither do the helpers.
compile "the umbrella without _GNU_SOURCE" "#include <nxr/nxr.h>
#ifdef CPU_SETSIZE
#error CPU_SETSIZE without _GNU_SOURCE
#endif
int x(void);
int x(void) { return nxr_cpuset_parse(\"0\", 0); }" cc "${cflags[@]}" -x c
echo "headers_test: $(wc -w <<<"$headers") headers, $checks compilations passed"
echo "$checks passed, 0 failed"
