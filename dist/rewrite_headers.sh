#!/bin/sh
# rewrite_headers.sh OUTDIR HEADER... [--known NAME...]
# Copies nxr's public headers flat into OUTDIR (installed as include/nxr/,
# used as <nxr/nxr.h>). In the tree they include each other by package path
# ("alloc/nxr_alloc.h"); flat, that becomes "nxr_alloc.h", which a quoted
# include finds next to the including header. A quoted include must name
# one of the HEADERs or a --known NAME (a public header staged by another
# target) as "<package>/<name>"; anything else, an internal header say, is
# an error: the installed headers must stand alone. Their comments are
# rewritten the same way (a header by its name, docs/X.md as the installed
# share/doc/nxr/X.md), and one still naming a source path or a Bazel label
# is an error too.
set -eu
outdir=$1
shift
headers=""
names=""
known=0
for a in "$@"; do
    if [ "$a" = "--known" ]; then
        known=1
    elif [ $known -eq 1 ]; then
        names="$names $a"
    else
        headers="$headers $a"
        names="$names $(basename "$a")"
    fi
done
for h in $headers; do
    # Every quoted include, as written between the quotes.
    for inc in $(sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([^"]*\)".*/\1/p' "$h"); do
        ok=0
        case $inc in
        */*/* | /*) ;;
        [a-z]*/nxr*.h) case " $names " in *" ${inc#*/} "*) ok=1 ;; esac ;;
        esac
        if [ $ok -eq 0 ]; then
            echo "rewrite_headers.sh: $h includes \"$inc\", which is not a public header" >&2
            exit 1
        fi
    done
    out="$outdir/$(basename "$h")"
    # The includes, then the comments' references to what is installed:
    # "executor/nxr_executor.h" is the header next door, "docs/X.md" is
    # installed as share/doc/nxr/X.md (tools/install.sh, dist/stage.sh).
    sed -e 's|^\([[:space:]]*#[[:space:]]*include[[:space:]]*"\)[a-z_]*/\(nxr[a-z0-9_]*\.h"\)|\1\2|' \
        -e 's#\(alloc\|base\|domains\|executor\|kernels\|runtime\)/\(nxr[a-z0-9_]*\.h\)#\2#g' \
        -e 's#\([^/a-z]\)docs/\([a-z0-9-]*\.md\)#\1share/doc/nxr/\2#g' \
        "$h" >"$out"
    # What is left must not point into nxr's source tree, which an install
    # does not have: a path into a package or bench/tests/tools, a Bazel
    # label.
    if grep -nE '(^|[^a-z_/.])(alloc|base|domains|executor|kernels|runtime|service|bench|tests|tools|dist|third_party|examples|docs)/|//[a-z_]*:' \
        "$out" >"$outdir/.tree-refs"; then
        echo "rewrite_headers.sh: $h refers to nxr's source tree, which is not installed:" >&2
        cat "$outdir/.tree-refs" >&2
        rm -f "$outdir/.tree-refs"
        exit 1
    fi
    rm -f "$outdir/.tree-refs"
    if grep -Eq '^[[:space:]]*#[[:space:]]*include[[:space:]]*"[^"]*/' "$out"; then
        echo "rewrite_headers.sh: $h: an include kept its directory after rewriting" >&2
        exit 1
    fi
done
