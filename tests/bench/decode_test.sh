#!/usr/bin/env bash
# bench/decode --short --json: exits 0, prints one JSON object whose
# tokens_match is true (the nxr engine, by calls and as one step per token,
# and the OpenMP row-loop engine generate the same greedy tokens from the
# same weights), with every key the user guide (docs/guide.md) promises; no
# figure is judged. A format that is not there yet
# exits 2 with a message that says so; a bad shape exits 2 and says why.
set -euo pipefail
decode=$(realpath "$1")
cd "${TEST_TMPDIR:-$(mktemp -d)}"

set +e
"$decode" --short --json >decode.json
rc=$?
set -e
cat decode.json
python3 - decode.json <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
for key in ("shape", "weights", "tokens", "nxr", "omp", "read_gbs", "fraction_of_limit",
            "tokens_match"):
    assert key in r, (key, r)
for engine in ("nxr", "nxr_step", "omp"):
    assert "tok_s" in r[engine] and "weight_gbs" in r[engine], r[engine]
assert r["shape"] == "short" and r["weights"] == "f32" and r["tokens"] == 8, r
assert r["dims"]["kv_heads"] < r["dims"]["heads"], "the short shape exercises grouped-query attention"
assert r["tokens_match"] is True, "the engines generated different tokens: %r" % r
print("decode --short: tokens match (%d tokens, %d steps)" % (r["tokens"], r["steps"]))
PY
[ "$rc" -eq 0 ] || { echo "decode --short --json exited $rc"; exit 1; }

for format in bf16 int8; do
    set +e
    "$decode" --short --weights "$format" >out.txt 2>err.txt
    rc=$?
    set -e
    [ "$rc" -eq 2 ] || { echo "--weights $format exited $rc, not 2"; exit 1; }
    grep -q "not yet supported" err.txt || { echo "--weights $format: no clear message:"; cat err.txt; exit 1; }
done
set +e
"$decode" --short --heads 3 >out.txt 2>err.txt
rc=$?
set -e
[ "$rc" -eq 2 ] && grep -q "multiple of --heads" err.txt ||
    { echo "--heads 3 with dim 64: exit $rc:"; cat err.txt; exit 1; }
echo "decode_test: ok"
