#!/usr/bin/env bash
# tools/owners_check.sh: fails when runtime/ decides what the executor owns
# (docs/architecture.md, "Layers" and "One span loop, traced"):
#   1. runtime/ calls no executor operation (`ops->install`, `ops->submit`,
#      retain/release): executor/ dispatches (nxr__across_run,
#      nxr__exec_region, nxr__exec_call_under, executor/domain_executor.c);
#   2. runtime/ takes no permit and enters no domain itself: no arbiter
#      acquire/release, no union or exclusive permit call, no
#      nxr__exec_enter/leave (executor/permits.c, executor/admission.c);
#   3. every call on a context opens and closes through nxr__ctx_call_open/
#      close: the enter/leave pair is private to runtime/ctx.c.
# Comment lines are skipped. Usage: tools/owners_check.sh [root] (default:
# the checkout this script is in). Prints one line per violation and
# "owners: ok" or "owners: FAILED (n)"; exit status 1 on any violation.
set -uo pipefail
root=${1:-"$(dirname "$0")/.."}
cd "$root" || exit 2

failed=0
check() { # rule, pattern, files...
    local rule=$1 pattern=$2
    shift 2
    local hits
    hits=$(grep -nE "$pattern" "$@" 2>/dev/null | grep -vE '^[^:]+:[0-9]+:[[:space:]]*(/?\*|//)')
    if [ -n "$hits" ]; then
        while IFS= read -r h; do
            echo "owners: FAILED: $rule: $h"
            failed=$((failed + 1))
        done <<<"$hits"
    fi
}

runtime_files=(runtime/*.c runtime/internal/*.h)
check "runtime/ calls an executor operation (executor/ dispatches)" \
    'ops->(install|submit|retain|release)|nxr__executor_(retain|release)\(' "${runtime_files[@]}"
check "runtime/ takes a permit or enters a domain itself (executor/ chooses the permit)" \
    'nxr__arbiter_(acquire|release|request_init)[a-z_]*\(|nxr__union_permit_(acquire|release)\(|nxr__exclusive_permit_[a-z]+\(|nxr__exec_(enter|leave)(_batch)?\(' \
    "${runtime_files[@]}"
ctx_callers=()
for f in "${runtime_files[@]}"; do
    [ "$f" = runtime/ctx.c ] || ctx_callers+=("$f")
done
check "a context call opened without nxr__ctx_call_open" 'nxr__ctx_(enter|leave)\(' \
    "${ctx_callers[@]}"

if [ "$failed" -ne 0 ]; then
    echo "owners: FAILED ($failed)"
    exit 1
fi
echo "owners: ok (runtime/ calls no executor operation, takes no permit; every context call opens through nxr__ctx_call_open)"
