#!/usr/bin/env bash
# tools/layering_check.sh: fails when a package depends on one above it.
# Every dependency goes downward (docs/architecture.md, "Layers"): each
# package has a layer below, and
#   1. every Bazel dependency between two packages (`bazel query`, direct
#      edges, select() branches included) goes to the same or a lower layer;
#   2. every quoted #include of a package path ("runtime/nxr.h") names the
#      same or a lower layer; an internal/ header of another package only
#      from a library package, bench/ or a test; and an example includes no
#      tree path at all (it builds against the installed <nxr/...> only);
#   3. the packages on the public API only (service, examples, tools, dist)
#      name no :*_internal target (Bazel's visibility forbids it too);
#   4. the layer table of docs/architecture.md lists the packages in
#      nxr.bzl's order (NXR_LAYERS, the one table, read from there).
# Prints one line per violation and "layering: ok ..." or "layering: FAILED
# ..."; exit status 1 on any violation. CI runs it in stage 1 (.ci/run).
set -uo pipefail
cd "$(dirname "$0")/.."

# The one table (package -> layer, bottom up) is nxr.bzl's NXR_LAYERS, a
# Starlark dict of literals, which Python reads as it is. The library
# packages are derived as nxr.bzl derives NXR_LIBRARY_LAYERS.
eval "$(python3 - <<'PY'
import ast, re
src = open("nxr.bzl").read()
table = ast.literal_eval(re.search(r"^NXR_LAYERS = (\{.*?^\})", src, re.S | re.M).group(1))
print("declare -A LAYER=(" + " ".join("[%s]=%d" % kv for kv in table.items()) + ")")
lib = [p for p, l in table.items() if 1 <= l <= 6 and p not in ("root", "tests/support")]
print("LIBRARY=(" + " ".join(lib) + ")")
PY
)"
((${#LAYER[@]})) || { echo "layering: FAILED: no NXR_LAYERS table in nxr.bzl"; exit 1; }
PUBLIC_ONLY=(service examples tools dist)
# The one edge upward, on purpose: under --config=tsan //third_party:criterion
# is the in-tree stand-in for Criterion (tests/support/tsan_criterion).
ALLOWED_EDGES=("//third_party:criterion -> //tests/support:criterion_standin")

failed=0
fail() {
    echo "layering: FAILED: $*"
    failed=$((failed + 1))
}
layer_of() { # package -> its layer, or "" when the table does not know it
    if [ -n "${LAYER[$1]+x}" ]; then echo "${LAYER[$1]}"; fi
}
is_library() { [[ " ${LIBRARY[*]} " == *" $1 "* ]]; }

# 4. The layer table of docs/architecture.md agrees with nxr.bzl's.
# The package column of docs/architecture.md's layer table, row by row:
# each row's packages must be known here and never below the row before.
prev=0 rows=0
while IFS= read -r pkgs; do
    row_max=0
    for p in $pkgs; do
        l=$(layer_of "$p")
        if [ -z "$l" ]; then
            fail "docs/architecture.md's layer table lists $p/, which this table does not know"
            continue
        fi
        [ "$l" -ge "$prev" ] ||
            fail "docs/architecture.md lists $p/ (layer $l) after a package of layer $prev"
        [ "$l" -gt "$row_max" ] && row_max=$l
    done
    prev=$row_max rows=$((rows + 1))
done < <(sed -n '/^| layer | package |/,/^$/p' docs/architecture.md | tail -n +3 |
    while IFS='|' read -r _ _ col _; do
        grep -o '`[a-z_]*/`' <<<"$col" | tr -d '`/' | xargs
    done)
[ "$rows" -ge "${#LIBRARY[@]}" ] || fail "no layer table found in docs/architecture.md"

# 1 and 3. Bazel's edges: "//pkg:target" -> "//pkg2:target2", implicit
# dependencies (toolchains, rule attributes) left out.
edges=$(bazel query --noimplicit_deps --output=graph --nograph:factored 'deps(//...:*, 1)' \
    2>"${TMPDIR:-/tmp}/layering_query.err")
if [ $? -ne 0 ] || [ -z "$edges" ]; then
    fail "bazel query failed: $(tail -n 3 "${TMPDIR:-/tmp}/layering_query.err")"
fi
n_edges=0
while read -r from to; do
    fp=${from#//}
    fp=${fp%%:*}
    fp=${fp:-root}
    tp=${to#//}
    tp=${tp%%:*}
    tp=${tp:-root}
    [ "$fp" = "$tp" ] && continue
    [[ " ${ALLOWED_EDGES[*]} " == *" $from -> $to "* ]] && continue
    n_edges=$((n_edges + 1))
    fl=${LAYER[$fp]-}
    tl=${LAYER[$tp]-}
    if [ -z "$fl" ] || [ -z "$tl" ]; then
        fail "$from -> $to: a package of the two is not in tools/layering_check.sh's table"
        continue
    fi
    [ "$tl" -le "$fl" ] ||
        fail "$from ($fp/, layer $fl) depends on $to ($tp/, layer $tl), a layer above it"
    if [[ " ${PUBLIC_ONLY[*]} " == *" $fp "* ]] && [[ $to == *_internal ]]; then
        fail "$from ($fp/ is on the public API only) depends on $to, an internal target"
    fi
done < <(sed -n 's/^ *"\(\/\/[^"]*\)" -> "\(\/\/[^"]*\)"$/\1 \2/p' <<<"$edges")

# 2. Includes, in every source file of every package of the table.
n_includes=0
while IFS=: read -r file _ inc; do
    # The file's package: the longest prefix of its directory in the table
    # (bash only: this loop runs once per include).
    fp=${file%/*}
    while [[ $fp == */* ]] && [ -z "${LAYER[$fp]-}" ]; do
        fp=${fp%/*}
    done
    fl=${LAYER[$fp]-}
    [ -n "$fl" ] || continue
    # The included package: tests/<x>/... or <x>/...
    case $inc in
    tests/*/*) ip=${inc#tests/} ip=tests/${ip%%/*} ;;
    */*) ip=${inc%%/*} ;;
    *) continue ;; # a file next to the includer
    esac
    il=${LAYER[$ip]-}
    [ -n "$il" ] || continue # not a package path (criterion/..., a system header)
    n_includes=$((n_includes + 1))
    if [ "$fp" = examples ]; then
        fail "$file includes \"$inc\": an example includes only <nxr/...> and its own files"
        continue
    fi
    [ "$il" -le "$fl" ] ||
        fail "$file ($fp/, layer $fl) includes \"$inc\" ($ip/, layer $il), a layer above it"
    if [[ $inc == */internal/* ]] && [ "$ip" != "$fp" ] && ! is_library "$fp" &&
        [ "$fp" != bench ] && [[ $fp != tests/* ]]; then
        fail "$file includes \"$inc\": $ip/'s internals are for the library packages, bench/ and tests"
    fi
done < <(grep -rnE --include='*.c' --include='*.h' --include='*.cc' --include='*.inc' \
    '^[[:space:]]*#[[:space:]]*include[[:space:]]*"[^"]+"' \
    "${LIBRARY[@]}" service examples tools bench dist tests 2>/dev/null |
    sed -E 's/^([^:]*):([0-9]+):[[:space:]]*#[[:space:]]*include[[:space:]]*"([^"]+)".*/\1:\2:\3/')

if [ "$failed" -eq 0 ]; then
    echo "layering: ok ($n_edges Bazel edges between packages, $n_includes package includes, one order in nxr.bzl and docs/architecture.md)"
else
    echo "layering: FAILED: $failed violation(s)"
    exit 1
fi
