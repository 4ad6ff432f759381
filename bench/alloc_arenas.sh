#!/usr/bin/env bash
# bench/alloc with each arena back end, in turns, in one run: what the
# shared library's arena (alloc/arena_mmap.c: one extent per allocation,
# libnxr.so ships it) costs against the static library's (alloc/arena.c:
# a private jemalloc arena, libnxr.a ships it).
#
#   bazel run //bench:alloc_arenas [-- [--json] [--short] [ROUNDS]]
#
# Runs //bench:alloc and //bench:alloc_mmap_arena alternately ROUNDS times
# (default 3; each run is itself the median of 11 samples; --short: a tenth
# of bench/alloc's iterations, for a loaded machine), takes the median
# of each figure over the rounds, and prints every row of bench/alloc for
# both with the ratio mmap / jemalloc (1.0: the same cost; > 1: the shared
# library's arena is slower). The pool rows hit the pool's cache, not the
# arena, in both builds; nxr_domain_malloc (the jemalloc_* keys) and the
# scope step reach the arena. Also prints the load average.
set -euo pipefail
json=0
rounds=3
short=()
for a in "$@"; do
    case $a in
    --json) json=1 ;;
    --short) short=(--short) ;;
    [0-9]*) rounds=$a ;;
    *) echo "usage: alloc_arenas [--json] [--short] [ROUNDS]" >&2; exit 2 ;;
    esac
done
here=${RUNFILES_DIR:-$0.runfiles}/nxr/bench
[ -x "$here/alloc" ] || here=$(dirname "$0")
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
load_before=$(cut -d' ' -f1-3 /proc/loadavg)
for ((i = 0; i < rounds; i++)); do
    "$here/alloc" --json "${short[@]}" >"$work/jemalloc.$i.json"
    "$here/alloc_mmap_arena" --json "${short[@]}" >"$work/mmap.$i.json"
done
load_after=$(cut -d' ' -f1-3 /proc/loadavg)
python3 - "$work" "$rounds" "$json" "$load_before" "$load_after" <<'PY'
import json, statistics, sys
work, rounds, as_json, load_before, load_after = sys.argv[1], int(sys.argv[2]), sys.argv[3] == "1", sys.argv[4], sys.argv[5]
runs = {a: [json.load(open("%s/%s.%d.json" % (work, a, i))) for i in range(rounds)] for a in ("jemalloc", "mmap")}
for a, rs in runs.items():
    for r in rs:
        if r["arena"] != a:
            sys.exit("alloc_arenas: the %s build says its arena is %s" % (a, r["arena"]))
rows = [
    ("pool 4k", "pool_4k_ns"), ("pool 64k", "pool_64k_ns"), ("pool 4m", "pool_4m_ns"),
    ("pool+touch 4k", "pool_touch_4k_ns"), ("pool+touch 64k", "pool_touch_64k_ns"),
    ("pool+touch 4m", "pool_touch_4m_ns"),
    ("domain_malloc+touch 4k", "jemalloc_4k_ns"), ("domain_malloc+touch 64k", "jemalloc_64k_ns"),
    ("domain_malloc+touch 4m", "jemalloc_4m_ns"),
    ("scope step (108 allocs)", "scope_step_ns"),
    ("malloc+touch 4k (glibc, control)", "malloc_4k_ns"),
]
med = {a: {k: statistics.median(r[k] for r in rs) for _, k in rows} for a, rs in runs.items()}
extra = {a: {k: statistics.median(r[k] for r in rs) for k in
             ("steady_state_syscalls", "jemalloc_4k_faults_per_op", "jemalloc_4k_syscalls_per_op")}
         for a, rs in runs.items()}
if as_json:
    out = {"rounds": rounds, "loadavg_before": load_before, "loadavg_after": load_after}
    for _, k in rows:
        out["jemalloc_arena_" + k] = med["jemalloc"][k]
        out["mmap_arena_" + k] = med["mmap"][k]
        out["ratio_" + k] = round(med["mmap"][k] / med["jemalloc"][k], 2)
    for k in extra["mmap"]:
        out["jemalloc_arena_" + k] = extra["jemalloc"][k]
        out["mmap_arena_" + k] = extra["mmap"][k]
    print(json.dumps(out))
else:
    print("bench/alloc, arena of libnxr.a (jemalloc) vs of libnxr.so (mmap), %d rounds in turns, "
          "medians; load %s -> %s" % (rounds, load_before, load_after))
    print("%-34s %14s %14s %12s" % ("row (ns per op)", "jemalloc (.a)", "mmap (.so)", "mmap/jemalloc"))
    for name, k in rows:
        j, m = med["jemalloc"][k], med["mmap"][k]
        print("%-34s %14.1f %14.1f %11.2fx" % (name, j, m, m / j))
    print("steady-state syscalls in the pool and scope loops: jemalloc %d, mmap %d; "
          "domain_malloc 4k: %.2f / %.2f syscalls and %.2f / %.2f page faults per op"
          % (extra["jemalloc"]["steady_state_syscalls"], extra["mmap"]["steady_state_syscalls"],
             extra["jemalloc"]["jemalloc_4k_syscalls_per_op"], extra["mmap"]["jemalloc_4k_syscalls_per_op"],
             extra["jemalloc"]["jemalloc_4k_faults_per_op"], extra["mmap"]["jemalloc_4k_faults_per_op"]))
PY
