#!/usr/bin/env bash
# examples/service runs, serves its 32 requests and checks its own answers
# (it exits non-zero when the probabilities do not add up).
set -euo pipefail
out=$("$1")
echo "$out"
grep -q "^served 32 requests on [0-9]* domain(s)" <<< "$out"
