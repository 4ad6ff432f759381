#!/usr/bin/env bash
# `nxr demo` (the language model, the default) end to end, on a tiny
# decoder (no timing is checked anywhere):
#  - its JSON has every key the issue lists; every sequence is served, its
#    token count within --gen, by every path; the unbatched and OpenMP
#    peers serve one sequence a step; the tokens of every sequence match
#    between nxr's paths (batched, unbatched, flat);
#  - every domain's weights and KV cache are on its node where memory is
#    bound (the page check); two domains (declared on one CPU) both serve;
#    the share of each domain's (and flat's) packed weights on huge pages:
#    none for matrices too small to advise (unless THP is `always`);
#  - the read-bandwidth limit line when measured, null when not; the
#    compute line's bound from the products' FLOPs (every row through the
#    layers, the classifier once per token);
#  - the table's last line says whether its ratios come from alternated
#    rounds or from one round with nxr first;
#  - --span (every sequence over every domain, weights sharded by node):
#    the same keys as the other paths, nxr's tokens, its shards on node;
#  - bad input exits 2 with one line naming the flag, nothing on stdout.
set -euo pipefail
nxr=$1
tiny=(--dim 64 --hidden 176 --layers 2 --heads 4 --kv-heads 2 --vocab 512 --prompt 3-20
      --gen 2-9 --clients 3 --sequences 9 --kv-mib 4 --step-tokens 8 --seed 5 --time-budget 0)
first=$(python3 -c 'import os; print(min(os.sched_getaffinity(0)))')

check() { # file domains machine-measured
    python3 - "$@" <<'PY'
import json, os, sys
path, ndom, measured = sys.argv[1], int(sys.argv[2]), sys.argv[3] == "1"
d = json.load(open(path))
for k in ("model", "size", "weights", "clients", "tokens_per_s", "ttft_p50_ms", "ttft_p99_ms",
          "itl_p50_ms", "itl_p99_ms", "batch_mean", "domains", "unbatched", "flat", "omp",
          "fraction_of_limit", "tokens_match"):
    assert k in d, ("missing key", k)
assert d["model"] == "llama" and d["size"] == "custom" and d["weights"] == "f32", d
assert d["sequences"] == 9 and 9 * 2 <= d["tokens"] <= 9 * 9, d
assert d["tokens_match"] is True and d["sequences_compared"] == 9, d
assert d["rounds_run"] == d["rounds_planned"] == 2, d
assert 1.0 <= d["batch_mean"] <= 3.0, d
u = d["unbatched"]
assert u["sequences"] == 9 and u["tokens"] == d["tokens"] and u["batch_mean"] == 1.0, u
fl, om = d["flat"], d["omp"]
assert fl["sequences"] == 9 and fl["tokens"] == d["tokens"] and fl["batch_mean"] >= 1.0, fl
assert om["sequences"] == 9 and om["tokens"] == d["tokens"] and om["batch_mean"] == 1.0, om
assert 0 <= d["omp_sequences_same"] <= 9, d
for k in ("tokens_per_s", "ttft_p50_ms", "ttft_p99_ms", "itl_p50_ms", "itl_p99_ms"):
    assert u[k] >= 0 and d[k] >= 0, k
assert d["ttft_p50_ms"] <= d["ttft_p99_ms"] and d["itl_p50_ms"] <= d["itl_p99_ms"], d
assert len(d["domains"]) == ndom, d["domains"]
assert sum(x["tokens"] for x in d["domains"]) == d["tokens"], d["domains"]
# Huge pages: the tiny decoder's matrices are all under 2 MiB, so nxr
# advises none of them, and unless THP is `always` none is on huge pages.
thp = open("/sys/kernel/mm/transparent_hugepage/enabled").read() \
    if os.path.exists("/sys/kernel/mm/transparent_hugepage/enabled") else "[never]"
unadvised_is_small = "[always]" not in thp
huge = [x["weights_huge"] for x in d["domains"]]
if d["flat"] is not None:
    huge.append(d["flat_weights_huge"])
else:
    assert d["flat_weights_huge"] is None, d["flat_weights_huge"]
# The page-table query (PAGEMAP_SCAN) is Linux 6.7's; before it, unknown.
release = os.uname().release.split("-")[0].split(".")
can_say = (int(release[0]), int(release[1])) >= (6, 7)
for h in huge:
    assert (h is not None) == can_say and (h is None or 0.0 <= h <= 1.0), huge
    assert h is None or h == 0.0 or not unadvised_is_small, huge
for x in d["domains"]:
    assert x["tokens"] > 0, ("a domain served nothing", x)
    for k in ("weights_on_node", "kv_on_node"):
        assert x[k] is None or 0.0 <= x[k] <= 1.0, (k, x)
if measured:
    assert d["read_gbs"] > 0 and d["fraction_of_limit"] > 0, d
    assert d["bound_tokens_per_s"] > 0, d
    # The compute line: every row runs the layers' products, only a row
    # that makes a token (one per token) the classifier. The tiny shape's
    # multiply-adds: 2 layers of Q/K/V (64 + 2 x 32 outputs), O, W1 and W3
    # (176 each), W2, all of 64 inputs but W2's 176; the classifier 512 x 64.
    layer_macs = 2 * ((64 + 2 * 32) * 64 + 64 * 64 + 2 * 176 * 64 + 64 * 176)
    flops = 2 * (layer_macs * d["rows"] + 512 * 64 * d["tokens"])
    assert d["rows"] >= d["tokens"], d
    want = d["gemm_peak_gflops"] * 1e9 * d["tokens"] / flops
    assert abs(d["compute_bound_tokens_per_s"] - want) <= 1 + 2e-3 * want, (want, d)
else:
    assert d["fraction_of_limit"] is None, d
print("%s: %d domain(s), %d tokens, batch %.2f, tokens match" %
      (path, ndom, d["tokens"], d["batch_mean"]))
PY
}

"$nxr" demo "${tiny[@]}" --json --plot llama.svg > llama.json
check llama.json 1 1
# --plot: three panels; each path's ITL and TTFT curves (TTFT: a point per
# sequence), and nxr's steps over time, a curve per domain.
python3 - llama.svg llama.json <<'PY'
import json, sys, xml.etree.ElementTree as ET
ns = "{http://www.w3.org/2000/svg}"
svg, d = ET.parse(sys.argv[1]).getroot(), json.load(open(sys.argv[2]))
assert svg.tag == ns + "svg", svg.tag
panels = [g for g in svg.iter(ns + "g") if g.get("class") == "panel"]
assert [p.get("data-kind") for p in panels] == ["cdf-log10-x", "cdf-log10-x", "lines"], panels
def curves(p):
    return {c.get("data-series"): c.get("d").count("L") + 1
            for c in p.iter(ns + "path") if c.get("class") == "curve"}
paths = {"nxr", "unbatched", "flat", "OpenMP"}
itl, ttft, steps = (curves(p) for p in panels)
assert set(itl) == paths, itl
assert ttft == {p: 9 for p in paths}, ttft
assert len(steps) == len(d["domains"]) and all(n >= 1 for n in steps.values()), steps
print("plot: ITL and TTFT of 4 paths, %d step(s) of nxr" % sum(steps.values()))
PY
"$nxr" demo --model llama "${tiny[@]}" --machine 0 --json > unmeasured.json
check unmeasured.json 1 0
"$nxr" demo "${tiny[@]}" --machine 0 > llama.txt
grep -q "tokens: identical on nxr, unbatched and flat" llama.txt
# The table says how its ratios were made: two rounds, the order rotated;
# one round (one sequence: one round is all there is) runs nxr first.
grep -qx "  (ratios from 2 alternated rounds of one run)" llama.txt
"$nxr" demo "${tiny[@]}" --machine 0 --sequences 1 > one_round.txt
grep -qx "  (ratios from one round of one run, the paths in turn, nxr first: not alternated)" \
    one_round.txt
# Two domains on one CPU: new sequences go to the one with most free cache.
"$nxr" demo "${tiny[@]}" --machine 0 --domains "0:$first;1:$first shared" --json > two.json
check two.json 2 0
# The packed formats (issue 28): every matrix in bf16 or 8-bit blocks; nxr's
# three paths run the same kernels on the same sequences, so their tokens
# are still identical.
for f in bf16 int8; do
    "$nxr" demo "${tiny[@]}" --machine 0 --weights "$f" --json > "$f.json"
    python3 - "$f.json" "$f" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
assert d["weights"] == sys.argv[2], d["weights"]
assert d["tokens_match"] is True and d["sequences_compared"] == 9, d
print("%s: tokens identical on nxr's paths" % sys.argv[2])
PY
done
# --span: every sequence over every domain at once, the weights sharded by
# node; the same keys as the other paths, the tokens nxr's. On two domains
# declared on one CPU (runs under `taskset -c 1`), on two synthetic nodes
# (one CPU each) and with --no-compare (nxr and span only).
span_check() { # file members compared-paths
    python3 - "$@" <<'PY'
import json, sys
d, members, others = json.load(open(sys.argv[1])), int(sys.argv[2]), sys.argv[3] == "peers"
s, u = d["span"], d["unbatched"] if others else d
assert s is not None and d["span_members"] == members, (d["span_members"], s)
keys = ("sequences", "tokens", "wall_s", "tokens_per_s", "ttft_p50_ms", "ttft_p99_ms",
        "itl_p50_ms", "itl_p99_ms", "batch_mean", "steps")
assert all(k in s for k in keys) and (not others or set(s) == set(u)), (s, u)
assert s["sequences"] == 9 and s["tokens"] == d["tokens"], s
assert d["tokens_match"] is True and d["sequences_compared"] == 9, d
assert s["itl_p50_ms"] <= s["itl_p99_ms"], s
for x in d["domains"]:
    assert x["shards_on_node"] is None or 0.0 <= x["shards_on_node"] <= 1.0, x
    if x["node"] >= 0 and x["weights_on_node"] == 1.0 and x["shards_on_node"] is not None:
        assert x["shards_on_node"] == 1.0, x
print("%s: span over %d domain(s), tokens nxr's, ITL p50 %.2fx one domain's" %
      (sys.argv[1], members, s["itl_p50_ms"] / max(d["itl_p50_ms"], 1e-9)))
PY
}
"$nxr" demo "${tiny[@]}" --machine 0 --span --domains "0:$first;1:$first shared" --json > span2.json
span_check span2.json 2 peers
python3 -c '
import json; d = json.load(open("llama.json"))
assert d["span"] is None and d["span_members"] == 0, d'
"$nxr" demo "${tiny[@]}" --machine 0 --span --no-compare --json > span1.json
span_check span1.json 1 alone
"$nxr" demo "${tiny[@]}" --machine 0 --span --domains "0:$first;1:$first shared" > span.txt
grep -q "^  span: each sequence over 2 domains at once, weights sharded by node; inter-token latency p50 .*x one domain's (nxr)$" span.txt
grep -q "tokens: identical on nxr, unbatched, flat and span" span.txt
"$nxr" demo "${tiny[@]}" --machine 0 --span --no-compare > span1.txt
grep -q "^  (span: one domain only" span1.txt
ncpu=$(python3 -c 'import os; print(len(os.sched_getaffinity(0)))')
if ((ncpu >= 2)); then
    NXR_TOPOLOGY="synthetic:pack:2 numa:1(indexes=0,3) pu:1" \
        "$nxr" demo "${tiny[@]}" --machine 0 --span --json > span_nodes.json
    span_check span_nodes.json 2 peers
else
    echo "SKIP --span on two synthetic nodes: needs 2 allowed CPUs, this process has $ncpu"
fi

# Where memory is bound to a node, the weights and the cache are on it.
python3 - llama.json <<'PY'
import json, sys
for x in json.load(open(sys.argv[1]))["domains"]:
    if x["node"] >= 0 and x["weights_on_node"] is not None:
        assert x["weights_on_node"] == 1.0 and x["kv_on_node"] == 1.0, x
PY

# --metrics-port: the page is up while the demo runs and, with
# --metrics-hold 1, after it, with its last counters: the JSON report comes
# first (read here, blocking), then one scrape, then the demo exits.
coproc DEMO { "$nxr" demo "${tiny[@]}" --machine 0 --no-compare --json --metrics-port 0 \
    --metrics-hold 1 2>metrics.err; }
demo_pid=$DEMO_PID
read -r report <&"${DEMO[0]}"
port=$(sed -n 's|^nxr demo: metrics on http://127.0.0.1:\([0-9]*\)/metrics$|\1|p' metrics.err)
[ -n "$port" ] || { echo "no metrics line:"; cat metrics.err; exit 1; }
python3 - "$port" "$report" <<'PY'
import json, re, sys, urllib.request
port, report = sys.argv[1], json.loads(sys.argv[2])
page = urllib.request.urlopen("http://127.0.0.1:%s/metrics" % port).read().decode()
types = [l.split()[2] for l in page.splitlines() if l.startswith("# TYPE ")]
assert types and len(types) == len(set(types)), types
# Kernel calls and the packed bytes they streamed: the serving thread makes
# them on any CPU count (on one CPU it runs them itself: no region, no task).
calls = [int(m.group(1)) for m in re.finditer(r'^nxr_domain_kernel_calls_total\{[^}]*\} (\d+)$', page, re.M)]
streamed = [int(m.group(1)) for m in re.finditer(r'^nxr_domain_weight_bytes_total\{[^}]*\} (\d+)$', page, re.M)]
assert calls and sum(calls) > 0, "the last counters show no kernel call: %s" % page[:400]
assert streamed and sum(streamed) > 0, "the last counters show no weight bytes: %s" % page[:400]
print("metrics: %d families, the last counters after %d tokens" % (len(types), report["tokens"]))
PY
wait "$demo_pid"

# Bad input: exit 2, one line on stderr naming the flag, nothing on stdout.
bad() { # flag-named-in-message args...
    local want=$1
    shift
    set +e
    "$nxr" demo "$@" > bad.out 2> bad.err
    local rc=$?
    set -e
    [[ $rc -eq 2 ]] || { echo "demo $*: exit $rc, want 2"; cat bad.err; exit 1; }
    [[ $(wc -l < bad.err) -eq 1 ]] || { echo "demo $*: not one line:"; cat bad.err; exit 1; }
    grep -q -- "$want" bad.err || { echo "demo $*: message does not name $want:"; cat bad.err; exit 1; }
    [[ ! -s bad.out ]] || { echo "demo $*: printed on stdout"; exit 1; }
}
bad --model --model gpt
bad --model --model
bad --size --size 2b
bad --size --size short
bad --weights --weights f16
bad --plot --plot ""
bad --metrics-port --metrics-port 70000
bad --metrics-hold --metrics-hold 1
bad --plot --plot /nonexistent-dir/x.svg
bad --weights --weights f64
bad --prompt --prompt 9-3
bad --prompt --prompt 0-3
bad --gen --gen 5
bad --clients --clients 0
bad --clients --clients 65
bad --kv-mib --kv-mib 0
bad --kv-mib "${tiny[@]}" --kv-mib 1 --prompt 3-8000 --machine 0
bad --step-tokens --step-tokens x
bad --time-budget --time-budget -1
bad --heads --dim 30 --heads 4
bad --json --json=yes
bad --requests --requests 10
bad --bogus --bogus
bad --span --span --weights int8
bad --span --weights bf16 --span
bad --span --span=1
echo "bad input: all exit 2"
