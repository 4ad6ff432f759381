#!/usr/bin/env bash
# tools/quota_follow_demo.sh [NXR [DEMO FLAGS...]]: issue 32's quota-change
# table. A demo (`nxr demo --model mlp`, NXR_CPU_QUOTA=auto, NXR_QUOTA_FOLLOW_MS=100)
# serves in a cgroup of its own whose CPU quota is 2 CPUs; while it serves
# (`nxr top` sees it answer), the quota is lowered to 1 CPU. Prints what
# `nxr top --once --json` says of its budget before and after, how long
# after the write the budget followed (as nxr top saw it: read every
# 100 ms), and the quota-change table: that one run's own table by budget
# phase (the demo splits its requests at the budget change: before, under
# 2 CPUs; after, under 1), beside the nxr rows of the same demo run under a
# 1-CPU quota from the start (the level the p99 after should return to)
# and under 2 CPUs throughout. The three full tables follow.
#
# Needs a writable cgroup cpu controller (v1's cpu, or a delegated v2
# subtree with cpu: root on most machines) and two allowed CPUs; says why
# and exits 0 without it. The cgroup is removed on every path. Not a test:
# it prints figures of one noisy machine (compare only its own rows).
set -euo pipefail
cd "$(dirname "$0")/.."
nxr=${1:-bazel-bin/tools/nxr}
shift || true
flags=("$@")
[ ${#flags[@]} -gt 0 ] ||
    flags=(--model mlp --no-compare --machine 0 --requests 40000 --time-budget 16)
# Seconds the demo serves under 2 CPUs before the quota is lowered: enough
# requests in the "before" phase for its p99 (the demo serves about 16 s).
lower_after=${QUOTA_FOLLOW_LOWER_AFTER_S:-6}

if [ "$(nproc)" -lt 2 ]; then
    echo "quota_follow_demo: skipped: fewer than two allowed CPUs (a 1-CPU quota lowers nothing)"
    exit 0
fi

# This process's own cgroup with the cpu controller: v1 first, then v2.
parent=""
v2=false
line=$(grep -E '^[0-9]+:([^:]*,)?cpu(,[^:]*)?:' /proc/self/cgroup | head -1 || true)
if [ -n "$line" ] && [ -d "/sys/fs/cgroup/cpu${line##*:}" ]; then
    parent="/sys/fs/cgroup/cpu${line##*:}"
else
    line=$(grep -E '^0::' /proc/self/cgroup | head -1 || true)
    if [ -n "$line" ] && grep -qw cpu "/sys/fs/cgroup${line#0::}/cgroup.controllers" 2> /dev/null; then
        parent="/sys/fs/cgroup${line#0::}"
        v2=true
    fi
fi
dir="$parent/nxr-quota-follow-$$"
if [ -z "$parent" ] || ! mkdir "$dir" 2> /dev/null; then
    echo "quota_follow_demo: skipped: no writable cgroup cpu controller (${parent:-none found})"
    exit 0
fi

work=$(mktemp -d)
export XDG_RUNTIME_DIR="$work/xdg" # a registry of its own: only this demo
mkdir -m 0700 "$XDG_RUNTIME_DIR"
demo_pid=""
cleanup() {
    [ -n "$demo_pid" ] && kill "$demo_pid" 2> /dev/null || true
    wait 2> /dev/null || true
    rmdir "$dir" 2> /dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT

set_quota() { # CPUS
    if $v2; then
        echo "$(($1 * 100000)) 100000" > "$dir/cpu.max"
    else
        echo 100000 > "$dir/cpu.cfs_period_us"
        echo $(($1 * 100000)) > "$dir/cpu.cfs_quota_us"
    fi
}

# run_demo CPUS OUT: the demo in the cgroup, in the background (demo_pid).
run_demo() {
    set_quota "$1"
    NXR_CPU_QUOTA=auto NXR_QUOTA_FOLLOW_MS=100 NXR_PEERS=quiet \
        sh -c 'echo $$ > "$1/cgroup.procs" && shift && exec "$@"' sh "$dir" \
        "$nxr" demo "${flags[@]}" > "$2" 2>&1 &
    demo_pid=$!
}

budget() { # the demo's first domain's budget and limit, as nxr top reads it
    "$nxr" top --once --json --interval 100 | python3 -c '
import json, sys
top = json.load(sys.stdin)
r = [r for r in top["runtimes"] if r["pid"] == int(sys.argv[1])]
if not r or not r[0]["domains"]:
    print("- - -")
else:
    d = r[0]["domains"][0]
    print(d["budget"], d["budget_limit"] or "none", "answered" if r[0]["answered"] else "idle")
' "$demo_pid"
}

echo "== 2 CPUs throughout"
run_demo 2 "$work/two.txt"
wait "$demo_pid"
demo_pid=""
echo "== 1 CPU from the start"
run_demo 1 "$work/one.txt"
wait "$demo_pid"
demo_pid=""

echo "== 2 CPUs, lowered to 1 while serving"
run_demo 2 "$work/follow.txt"
# Serving: nxr top sees its runtime answer (its operations end).
for _ in $(seq 1 600); do
    read -r b limit state < <(budget)
    [ "$state" = answered ] && break
done
echo "before: budget $b ($limit), $state; lowering the quota in ${lower_after} s"
sleep "$lower_after" # not a test: a phase long enough to measure
read -r b limit state < <(budget)
echo "before: budget $b ($limit), $state"
set_quota 1
t0=$(date +%s%N)
for _ in $(seq 1 100); do
    read -r b limit state < <(budget)
    [ "$b" = 1 ] && break
done
t1=$(date +%s%N)
echo "after:  budget $b ($limit), $state; followed within $(((t1 - t0) / 1000000)) ms of the write (nxr top's reads included)"
wait "$demo_pid"
demo_pid=""

# The demo's phase section (from its "by budget phase" line to the blank
# line after it) and its nxr row.
phases_of() { sed -n '/by budget phase/,/^$/p' "$1"; }
nxr_row() { grep -m1 '^  nxr: one context per domain' "$1" || echo "  (no nxr row: see its table)"; }

echo
echo "==== the quota-change table: one run, 2 CPUs lowered to 1 while it served"
if [ -n "$(phases_of "$work/follow.txt")" ]; then
    phases_of "$work/follow.txt"
else
    echo "  no budget phase: the budget did not change while the demo served (see its table)"
fi
echo "---- for reference, the nxr row of whole runs (path, req/s, p50, p95, p99 ms):"
echo "  2 CPUs throughout:"
nxr_row "$work/two.txt"
echo "  1 CPU from the start:"
nxr_row "$work/one.txt"

for run in two one follow; do
    echo
    echo "---- demo table: $run"
    cat "$work/$run.txt"
done
