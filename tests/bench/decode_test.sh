#!/usr/bin/env bash
# bench/decode --short --json: exits 0, prints one JSON object whose
# tokens_match is true (the nxr engine, by calls and as one step per token,
# and the OpenMP row-loop engine generate the same greedy tokens from the
# same weights), with every key the user guide (docs/guide.md) promises; no
# figure is judged. bf16 and int8 weights run and are checked below; an
# unknown format and a bad shape exit 2 and say why.
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

# The packed formats: nxr's two engines agree on the format's tokens, nxr on
# f32 weights ran beside them (vs_f32), and the step's bytes are the
# format's: about half of f32's in bf16, about 36/128 of it in 8-bit blocks.
for format in bf16 int8; do
    "$decode" --short --json --weights "$format" >"$format.json" ||
        { echo "--weights $format exited $?"; exit 1; }
    python3 - "$format.json" decode.json "$format" <<'PY'
import json, sys
r, f32, fmt = json.load(open(sys.argv[1])), json.load(open(sys.argv[2])), sys.argv[3]
assert r["weights"] == fmt and r["tokens_match"] is True, r
assert r["nxr_f32"]["tok_s"] > 0 and r["vs_f32"] > 0, r
assert 0 <= r["leading_tokens_as_f32"] <= r["tokens"], r
share = r["step_weight_bytes"] / f32["step_weight_bytes"]
want = {"bf16": 0.5, "int8": 36 / 128}[fmt]
assert abs(share - want) < 0.05, (fmt, share, want)
print("decode --short --weights %s: %.3f of f32's bytes, %d leading tokens as f32" %
      (fmt, share, r["leading_tokens_as_f32"]))
PY
done
set +e
"$decode" --short --weights f16 >out.txt 2>err.txt
rc=$?
set -e
[ "$rc" -eq 2 ] && grep -q "not a format" err.txt ||
    { echo "--weights f16: exit $rc:"; cat err.txt; exit 1; }
set +e
"$decode" --short --heads 3 >out.txt 2>err.txt
rc=$?
set -e
[ "$rc" -eq 2 ] && grep -q "multiple of --heads" err.txt ||
    { echo "--heads 3 with dim 64: exit $rc:"; cat err.txt; exit 1; }
echo "decode_test: ok"
