#!/usr/bin/env python3
"""Checks one run of examples/mpi_ranks (the spied build) under mpirun.

Usage: check_ranks.py VARIANT RANKS OUT.json ERR.txt [--one-cpu] [--nodes-differ]

OUT.json is rank 0's --json output; ERR.txt is the job's stderr, where the
MPI_Allreduce witness (tests/mpi/mpi_spy.c) wrote what MPI was handed. Each
check prints "mpi: VARIANT: <check>: ok" or "... FAILED: <why>"; the exit
status is the number of failed checks (0: all passed). What is checked:
  - every rank ran (RANKS of them) and reported its place;
  - each rank's runtime sees only its bound CPUs: nxr's allowed set equals
    the affinity the kernel reports for the process (--one-cpu: one CPU);
  - the rank's domain lies inside that set, and the ranks' domain CPU sets
    are pairwise disjoint (--nodes-differ: and their NUMA nodes differ);
  - the in-place allreduce equals the reference computed on rank 0;
  - the pointer MPI_Allreduce received is the rank's pool buffer itself
    (MPI_IN_PLACE, the buffer's first byte, the whole output counted), and
    the buffer belongs to the rank's domain.
"""
import json
import re
import sys


def cpus(text):
    """A CPU list ("0-2,5") as a set of ints."""
    out = set()
    for part in filter(None, text.split(",")):
        lo, _, hi = part.partition("-")
        out.update(range(int(lo), int(hi or lo) + 1))
    return out


def main(argv):
    variant, nranks, out_path, err_path = argv[1], int(argv[2]), argv[3], argv[4]
    one_cpu = "--one-cpu" in argv
    nodes_differ = "--nodes-differ" in argv
    results = []

    def check(name, ok, why=""):
        results.append(ok)
        print(f"mpi: {variant}: {name}: " + ("ok" if ok else f"FAILED: {why}"))

    try:
        with open(out_path) as f:
            doc = json.load(f)
    except (OSError, ValueError) as e:
        check("rank 0 printed one JSON object", False, str(e))
        return 1
    ranks = doc.get("rank_info", [])
    check("every rank reported", doc.get("ranks") == nranks and len(ranks) == nranks and
          all("error" not in r for r in ranks), f"{doc.get('ranks')} ranks, {ranks}")
    if len(ranks) != nranks:
        return sum(1 for r in results if not r)

    for r in ranks:
        aff, allowed = cpus(r["affinity"]), cpus(r["allowed"])
        dom = cpus(r["domain"]["cpus"])
        check(f"rank {r['rank']} sees only its bound CPUs",
              allowed == aff and (not one_cpu or len(aff) == 1),
              f"affinity {r['affinity']}, nxr allowed {r['allowed']}")
        check(f"rank {r['rank']} domain lies in its allowed set", dom and dom <= allowed,
              f"domain {r['domain']['cpus']}, allowed {r['allowed']}")

    for i in range(nranks):
        for j in range(i + 1, nranks):
            a, b = cpus(ranks[i]["domain"]["cpus"]), cpus(ranks[j]["domain"]["cpus"])
            check(f"ranks {i} and {j} have disjoint domain CPU sets", not (a & b),
                  f"{ranks[i]['domain']['cpus']} and {ranks[j]['domain']['cpus']}")
    if nodes_differ:
        nodes = [r["domain"]["node"] for r in ranks]
        check("each rank's domain is another node", len(set(nodes)) == nranks and
              all(n >= 0 for n in nodes), f"nodes {nodes}")

    c = doc.get("check", {})
    check("the allreduce result equals the one-rank reference",
          c.get("ok") is True and c.get("max_abs_err", 1e300) <= c.get("tolerance", 0),
          f"{c}")

    try:
        with open(err_path) as f:
            err = f.read()
    except OSError as e:
        err = ""
        check("the witness's log exists", False, str(e))
    seen = {}
    pat = re.compile(r"^mpi_spy: rank (\d+) MPI_Allreduce sendbuf (\S+) recvbuf (0x[0-9a-f]+|\(nil\)) "
                     r"count (\d+)$", re.M)
    for m in pat.finditer(err):
        seen.setdefault(int(m.group(1)), []).append((m.group(2), m.group(3), int(m.group(4))))
    for r in ranks:
        calls = seen.get(r["rank"], [])
        buf = r["buffer"]
        data = int(buf["data"], 16)
        floats = r["allreduce"]["count"]
        ok = (len(calls) == 1 and calls[0][0] == "MPI_IN_PLACE" and calls[0][1] != "(nil)" and
              int(calls[0][1], 16) == data and calls[0][2] == floats and
              floats * 4 <= buf["bytes"])
        check(f"rank {r['rank']}: MPI_Allreduce got the pool buffer itself, in place", ok,
              f"MPI saw {calls}, the pool buffer is {buf['data']} ({buf['bytes']} bytes)")
        check(f"rank {r['rank']}: the buffer is its domain's", buf["domain"] == r["domain"]["id"],
              f"buffer of domain {buf['domain']}, rank on domain {r['domain']['id']}")
    return sum(1 for r in results if not r)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
