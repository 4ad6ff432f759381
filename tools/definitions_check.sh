#!/usr/bin/env bash
# tools/definitions_check.sh: fails when a public function has no written
# definition that ctags finds.
# Every function a public header declares NXR_API (the library packages'
# nxr*.h, listed by tests/support/api_functions.py) must appear in
# `ctags -R --kinds-C=f` over the library's sources: a definition a reader,
# grep and code navigation reach by its name. A definition produced by a
# macro (nxr_##name) is invisible to them, and so fails here.
# Needs Universal Ctags (tools/setup.sh installs it). Prints the missing
# names and "definitions: FAILED ...", or "definitions: ok ..."; exit status
# 1 when one is missing. CI runs it in stage 1 (.ci/run).
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1

LIBRARY=(base domains executor alloc kernels runtime)

ctags_bin=""
for c in ctags-universal ctags; do
    if command -v "$c" >/dev/null && "$c" --version 2>/dev/null | grep -q "Universal Ctags"; then
        ctags_bin=$c
        break
    fi
done
if [ -z "$ctags_bin" ]; then
    echo "definitions: FAILED: no Universal Ctags (run tools/setup.sh)"
    exit 1
fi

headers=()
for p in "${LIBRARY[@]}"; do
    headers+=("$p"/nxr*.h)
done
declared=$(python3 tests/support/api_functions.py "${headers[@]}") || {
    echo "definitions: FAILED: tests/support/api_functions.py"
    exit 1
}
defined=$("$ctags_bin" -R -x --languages=C --kinds-C=f "${LIBRARY[@]}" | awk '{print $1}' | sort -u)

missing=$(comm -23 <(sort -u <<<"$declared") <(echo "$defined"))
n=$(wc -l <<<"$declared")
if [ -n "$missing" ]; then
    sed 's/^/  no written definition: /' <<<"$missing"
    echo "definitions: FAILED: $(wc -l <<<"$missing") of $n NXR_API functions have no definition ctags finds"
    exit 1
fi
echo "definitions: ok: all $n NXR_API functions have a definition ctags finds"
