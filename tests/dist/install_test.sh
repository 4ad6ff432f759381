#!/usr/bin/env bash
# nxr installed and used as a host outside Bazel uses it. Stages an install
# of what //dist built into a temporary prefix with the same script
# tools/install.sh runs (dist/stage.sh), checks the layout (soname, links,
# flat headers), then builds and runs consumer.c five ways -- plain cc with
# `pkg-config --cflags --libs nxr` (shared), with `pkg-config --libs
# nxr-static` and `pkg-config --static --libs nxr-static` (libnxr.a), and
# with CMake's find_package(nxr) (nxr::nxr and nxr::nxr_static) -- plus the
# OpenMP adapter (nxr-omp, nxr::omp, nxr::omp_static), a C++17 host, and the
# installed `nxr` command. Each consumer checks its own results against
# references it computes itself.
set -euo pipefail
# (Output is captured before grep -q reads it: a producer killed by the
# early exit of grep -q would fail the pipeline under pipefail.)
root=$TEST_SRCDIR/nxr
src=$root/tests/dist
work=$TEST_TMPDIR
prefix=$work/prefix
checks=0
fail() {
    echo "install_test: FAILED: $*" >&2
    exit 1
}
ok() {
    checks=$((checks + 1))
    echo "  ok: $*"
}

# The sanitizer configs' runtimes (empty in a plain build): a host of an
# instrumented libnxr must link them too.
mapfile -t sanitizer_flags <"$root/dist/consumer_flags.txt"
cc=(cc -std=c11 -Wall -Wextra -Werror "${sanitizer_flags[@]}")

"$root/dist/stage" --prefix "$prefix" >/dev/null
export PKG_CONFIG_PATH=$prefix/lib/pkgconfig
version=$(pkg-config --modversion nxr)
major=${version%%.*}
[[ $version =~ ^[0-9]+\.[0-9]+\.[0-9]+$ ]] || fail "pkg-config --modversion nxr: '$version'"
[ "$(cat "$root/dist/version.txt")" = "$version" ] || fail "nxr.pc says $version"
ok "staged nxr $version into a temporary prefix"

# ---- Layout -----------------------------------------------------------------
for f in include/nxr/nxr.h lib/libnxr.so.$version lib/libnxr.a lib/libnxr_omp.so.$version \
    lib/libnxr_omp.a lib/pkgconfig/nxr.pc lib/pkgconfig/nxr-static.pc lib/pkgconfig/nxr-omp.pc \
    lib/cmake/nxr/nxrConfig.cmake lib/cmake/nxr/nxrConfigVersion.cmake bin/nxr; do
    [ -f "$prefix/$f" ] || fail "$f is not installed"
done
for lib in nxr nxr_omp; do
    [ "$(readlink "$prefix/lib/lib$lib.so")" = "lib$lib.so.$major" ] || fail "lib$lib.so link"
    [ "$(readlink "$prefix/lib/lib$lib.so.$major")" = "lib$lib.so.$version" ] || fail "lib$lib.so.$major link"
    soname=$(readelf -d "$prefix/lib/lib$lib.so.$version" | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')
    [ "$soname" = "lib$lib.so.$major" ] || fail "lib$lib.so.$version has soname '$soname'"
done
ok "lib{nxr,nxr_omp}.so.$version with soname .so.$major and the .so.$major and .so links"
if grep -En '^[[:space:]]*#[[:space:]]*include[[:space:]]*"[^"]*/' "$prefix"/include/nxr/*.h; then
    fail "an installed header includes a path with a directory"
fi
[ -z "$(find "$prefix/include/nxr" -mindepth 1 -not -name 'nxr*.h')" ] || fail "stray files in include/nxr"
ok "$(ls "$prefix/include/nxr" | wc -l) flat headers in include/nxr, none including a directory path"
# What the headers' comments point at is installed: share/doc/nxr/X.md.
docs=$(cat "$prefix"/include/nxr/*.h | grep -oE 'share/doc/nxr/[a-z0-9-]+\.md' | sort -u)
[ -n "$docs" ] || fail "no installed header names a document (share/doc/nxr/...)"
for d in $docs; do
    [ -f "$prefix/$d" ] || fail "an installed header names $d, which is not installed"
done
[ -f "$prefix/share/doc/nxr/README.md" ] || fail "share/doc/nxr/README.md is not installed"
ok "the $(wc -w <<<"$docs") documents the installed headers name are in share/doc/nxr"

run() { # label program: runs it with no library path help, checks its ok line
    local out
    out=$(env -u LD_LIBRARY_PATH "${@:2}" "$version") || fail "$1: exited $?"
    grep -q ': ok' <<<"$out" || fail "$1: no ok line in: $out"
    ok "$1: $out"
}

# ---- pkg-config, shared -------------------------------------------------------
# shellcheck disable=SC2046 # pkg-config's output is meant to be split
"${cc[@]}" "$src/consumer.c" -o "$work/consumer_shared" $(pkg-config --cflags --libs nxr) \
    -Wl,-rpath,"$prefix/lib"
grep -q "NEEDED.*\[libnxr.so.$major\]" <<<"$(readelf -d "$work/consumer_shared")" ||
    fail "consumer_shared does not need libnxr.so.$major"
run "cc \$(pkg-config --cflags --libs nxr)" "$work/consumer_shared"

# ---- The README's first program, as printed there ------------------------------
# The C block under "## A first program" in the installed README, built the way
# the README says (cc ... $(pkg-config --cflags --libs nxr)), and its output
# against the line the README promises.
awk '/^## A first program/{f=1} f&&/^```c$/{c=1;next} c&&/^```$/{exit} c' \
    "$prefix/share/doc/nxr/README.md" >"$work/first.c"
[ -s "$work/first.c" ] || fail "the README has no C block under '## A first program'"
promised=$(grep -oE '# x\[n-1\] = [0-9]+' "$prefix/share/doc/nxr/README.md" | head -1 | cut -c3-)
[ -n "$promised" ] || fail "the README does not say what its first program prints"
# shellcheck disable=SC2046
"${cc[@]}" "$work/first.c" -o "$work/first" $(pkg-config --cflags --libs nxr) -Wl,-rpath,"$prefix/lib"
first_out=$(env -u LD_LIBRARY_PATH "$work/first") || fail "the README's first program exited $?"
[ "$first_out" = "$promised" ] || fail "the README's first program printed '$first_out', the README says '$promised'"
ok "the README's first program builds as shown and prints '$first_out'"

# ---- pkg-config, static -------------------------------------------------------
for mode in "" "--static"; do
    exe=$work/consumer_static${mode:+_pc_static}
    # shellcheck disable=SC2046,SC2086
    "${cc[@]}" "$src/consumer.c" -o "$exe" $(pkg-config $mode --cflags --libs nxr-static)
    if grep -q 'NEEDED.*libnxr' <<<"$(readelf -d "$exe")"; then
        fail "$exe links libnxr.so, not libnxr.a"
    fi
    grep -q ' T nxr_runtime_create$' <<<"$(nm "$exe")" || fail "$exe does not hold nxr's code"
    run "cc \$(pkg-config $mode${mode:+ }--cflags --libs nxr-static) (libnxr.a)" "$exe"
done

# ---- OpenMP adapter, C++ -------------------------------------------------------
# shellcheck disable=SC2046
"${cc[@]}" "$src/omp_consumer.c" -o "$work/omp_consumer" $(pkg-config --cflags --libs nxr-omp) \
    -Wl,-rpath,"$prefix/lib"
run "cc \$(pkg-config --cflags --libs nxr-omp)" "$work/omp_consumer"
# shellcheck disable=SC2046
c++ -std=c++17 -Wall -Wextra -Werror "${sanitizer_flags[@]}" "$src/cxx_consumer.cc" \
    -o "$work/cxx_consumer" $(pkg-config --cflags --libs nxr) -Wl,-rpath,"$prefix/lib"
run "c++ -std=c++17 \$(pkg-config --cflags --libs nxr)" "$work/cxx_consumer"

# ---- CMake ------------------------------------------------------------------
flags="${sanitizer_flags[*]}"
cmake -S "$src/cmake" -B "$work/cmake" -DCMAKE_PREFIX_PATH="$prefix" \
    -DNXR_EXPECT_VERSION="$version" -DCMAKE_C_FLAGS="-Wall -Wextra -Werror $flags" \
    -DCMAKE_EXE_LINKER_FLAGS="$flags" >"$work/cmake.log" 2>&1 ||
    { cat "$work/cmake.log"; fail "cmake configure"; }
cmake --build "$work/cmake" >>"$work/cmake.log" 2>&1 || { cat "$work/cmake.log"; fail "cmake build"; }
ok "find_package(nxr $version EXACT) found it, find_package(nxr 99.0) did not"
! grep -q 'NEEDED.*libnxr' <<<"$(readelf -d "$work/cmake/consumer_static")" || fail "nxr::nxr_static links libnxr.so"
# Built with the imported targets' RPATH, so no LD_LIBRARY_PATH is needed.
run "cmake nxr::nxr" "$work/cmake/consumer_shared"
run "cmake nxr::nxr_static" "$work/cmake/consumer_static"
run "cmake nxr::omp" "$work/cmake/omp_consumer_shared"
run "cmake nxr::omp_static" "$work/cmake/omp_consumer_static"

# ---- The nxr command ------------------------------------------------------------
"$prefix/bin/nxr" info >"$work/info.txt" || fail "bin/nxr info exited $?"
grep -q '^domains: ' "$work/info.txt" || fail "bin/nxr info printed no domains line"
ok "bin/nxr info: $(grep '^domains: ' "$work/info.txt")"

echo "install_test: $checks checks passed"
echo "$checks passed, 0 failed"
