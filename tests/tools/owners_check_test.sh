#!/usr/bin/env bash
# tools/owners_check.sh over the runtime's sources in the runfiles: fails
# when runtime/ calls an executor operation, takes a permit itself, or opens
# a context call without nxr__ctx_call_open (docs/architecture.md).
set -euo pipefail
root="$TEST_SRCDIR/$TEST_WORKSPACE"
exec bash "$root/tools/owners_check.sh" "$root"
