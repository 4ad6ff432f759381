#!/usr/bin/env bash
# `nxr info --json` parses as JSON and matches the runtime: the domains' CPUs
# are this process's allowed CPUs (read independently, by Python), each
# domain's placement is verified and its workers equal its budget. Bad flags
# print usage and exit 2.
set -euo pipefail
nxr=$1
attach_pool=$2

"$nxr" info --json > info.json
"$nxr" info > info.txt
python3 - info.json <<'PY'
import json, os, sys
info = json.load(open(sys.argv[1]))
topo, domains = info["topology"], info["domains"]
allowed = sorted(os.sched_getaffinity(0))
assert topo["source"] == "hwloc", topo
assert sorted(topo["allowed"]) == allowed, (topo["allowed"], allowed)
assert topo["cpus"] >= len(allowed) and topo["nodes"] >= 1, topo
seen = []
for d in domains:
    for key in ("id", "node", "cpus", "admission", "placement", "workers", "budget",
                "executor_owner"):
        assert key in d, (key, d)
    assert d["admission"] == "managed" and d["placement"] == "verified", d
    assert d["executor_owner"] == "nxr", d
    # The budget is the domain's CPUs unless something said why not (a
    # machine whose cgroup has a CPU quota).
    assert d["workers"] == d["budget"], d
    assert d["budget"] == len(d["cpus"]) or d["budget_limited_by"] in ("quota", "num_threads"), d
    assert (d["budget_limited_by"] == "quota") == (d["budget"] < len(d["cpus"]) and
                                                   info["cpu_quota"] is not None), d
    seen += d["cpus"]
assert sorted(seen) == allowed, (seen, allowed)
prov = info["providers"]
assert prov["policy"] in ("strict", "exclusive"), prov
for fam in ("gemm", "elementwise", "reduction", "norm"):
    assert prov[fam]["name"] and prov[fam]["count"] and prov[fam]["runs_on"], prov[fam]
    # Schema 2 renamed the key; schema 1's stays one release with the same value.
    assert prov[fam]["placement"] == prov[fam]["runs_on"], prov[fam]
assert info["schema"] == 2, info.get("schema")
assert info["route"]["policy"] and info["route"] == info["placement"], (info["route"], info["placement"])
ob = prov["openblas"]
assert ob["threading"] in ("sequential", "pthreads", "openmp", "unknown"), ob
assert ob["core"], ob
# A parallel OpenBLAS cannot be confined: it must be classified so.
if ob["threading"] in ("pthreads", "openmp"):
    assert (ob["count"], ob["runs_on"]) == ("global-or-uncontrolled", "external-workers"), ob
assert ob["core_fallback"] == bool(ob["diagnostic"]), ob
assert info["fpenv"]["supported"] in (True, False)
assert len(set(seen)) == len(seen), "domains overlap"
print("nxr info --json: %d domain(s) over CPUs %s" % (len(domains), allowed))
PY
grep -q "placement verified" info.txt
grep -q "^cpu quota: " info.txt

# NXR_CPU_QUOTA sets the quota: reported with its source, and with two CPUs
# or more it lowers the budget to one, said per domain.
NXR_CPU_QUOTA=1 "$nxr" info --json > quota.json
NXR_CPU_QUOTA=1 "$nxr" info > quota.txt
python3 - quota.json <<'PY'
import json, os, sys
info = json.load(open(sys.argv[1]))
assert info["cpu_quota"] == {"cpus": 1, "source": "NXR_CPU_QUOTA=1 -> 1 CPU"}, info["cpu_quota"]
for d in info["domains"]:
    assert d["budget"] == 1 and d["workers"] == 1, d
    assert d["budget_limited_by"] == ("quota" if len(d["cpus"]) > 1 else None), d
PY
grep -q "^cpu quota: NXR_CPU_QUOTA=1 -> 1 CPU$" quota.txt
if [ "$(nproc)" -gt 1 ]; then grep -q "budget 1 (lowered by the CPU quota)" quota.txt; fi
NXR_CPU_QUOTA=ignore "$nxr" info --json | python3 -c 'import json,sys; assert json.load(sys.stdin)["cpu_quota"] is None'

# An attached pool whose executor does not say who owns it is the caller's:
# the example attaches one (owner left unset) as cooperative domain 100.
"$attach_pool" --json > attached.json
python3 - attached.json <<'PY'
import json, sys
domains = json.load(open(sys.argv[1]))["domains"]
pool = [d for d in domains if d["id"] == 100]
assert len(pool) == 1, domains
assert pool[0]["admission"] == "cooperative" and pool[0]["executor_owner"] == "caller", pool[0]
assert all(d["executor_owner"] == "nxr" for d in domains if d["id"] != 100), domains
print("attached pool: executor_owner", pool[0]["executor_owner"])
PY

# CPU ids from the allowed set (never assume CPUs 0 and 1).
read -r c0 c1 < <(python3 -c 'import os; c = sorted(os.sched_getaffinity(0)); print(c[0], c[1] if len(c) > 1 else -1)')

# Sparse node ids survive into the JSON: a synthetic machine whose PUs are
# allowed CPUs (two nodes when there are two CPUs, else one).
if [ "$c1" -ge 0 ]; then
    NXR_TOPOLOGY="synthetic:pack:2 numa:1(indexes=0,3) pu:1(indexes=$c0,$c1)" "$nxr" info --json > sparse.json
    want="[0, 3]"
else
    echo "sparse ids: one allowed CPU, one synthetic node"
    NXR_TOPOLOGY="synthetic:pack:1 numa:1(indexes=3) pu:1(indexes=$c0)" "$nxr" info --json > sparse.json
    want="[3]"
fi
python3 -c 'import json,sys; d=json.load(open("sparse.json"))["domains"]; ids=[x["id"] for x in d]; want=json.loads(sys.argv[1]); assert ids==want, ids; assert [x["node"] for x in d]==want; print("sparse ids", ids)' "$want"

# --prometheus: the live counters' page, a family per # TYPE line, a sample
# per domain for the per-domain families.
"$nxr" info --prometheus > metrics.txt
python3 - metrics.txt info.json <<'PY'
import json, re, sys
lines = open(sys.argv[1]).read().splitlines()
domains = json.load(open(sys.argv[2]))["domains"]
types = [l.split()[2] for l in lines if l.startswith("# TYPE ")]
assert len(types) == len(set(types)), "a family twice"
workers = [l for l in lines if l.startswith("nxr_domain_workers{")]
assert len(workers) == len(domains), workers
for l in lines:
    if not l.startswith("#"):
        name, value = re.match(r"^([a-zA-Z_][a-zA-Z0-9_]*)(?:\{[^}]*\})? (\S+)$", l).groups()
        float(value)
print("nxr info --prometheus: %d families, %d domain(s)" % (len(types), len(workers)))
PY

# A configuration error exits 1 with the typed error named.
if NXR_DOMAINS="0:$c0;1:$c0" "$nxr" info 2> err.txt; then echo "overlap accepted"; exit 1; fi
grep -q NXR_EOVERLAP err.txt

# Usage errors exit 2.
set +e
"$nxr" info --bogus 2> /dev/null; rc=$?
set -e
[ "$rc" -eq 2 ] || { echo "bad flag exited $rc, want 2"; exit 1; }
