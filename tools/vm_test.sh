#!/usr/bin/env bash
# vm_test.sh -- runs nxr's test binaries inside multi-node NUMA VMs.
#
#     tools/vm_test.sh                       # the layout-dependent tests (below), 2- and 4-node VMs
#     tools/vm_test.sh --tagged              # only the tests tagged "numa_vm"
#     tools/vm_test.sh --nodes 2 //tests/alloc:placement_test //tests/runtime:multinode_test
#     tools/vm_test.sh --nodes 4 --no-demo --repeat 8 //tests/runtime:attach_test   # hunt a flake
#
# Builds the targets with Bazel on the host (the VM has no Bazel), copies
# the binaries without their debug info into a scratch directory, and boots
# one throw-away QEMU VM per node count through numa-vm (the project's
# shared/tools/numa-vm next to this repository, else /work/shared/tools/numa-vm;
# override with NUMA_VM=/path). Inside, one script runs every binary in
# turn with NXR_TEST_NEED_NODE1=1, so that the tests that need a second node
# (page residency on node 1, workers on node 1's CPUs) must run there, not
# skip. Layouts: 2 nodes x 2 CPUs, and 4 nodes x 1 CPU. Output: one line per
# binary (Criterion's synthesis), the last lines of a failing one, and a
# per-VM total; exits non-zero when any binary fails or a VM does not report.
# Each VM also runs `nxr demo --span` on tiny sizes (the demo check): every
# domain must report weights_on_node = 1.0 (its replica's pages on its own
# node, as move_pages says) and shard_on_node = 1.0 (its span shards, one
# span member per node), placement verified, its requests computed on its own
# CPUs, one domain per node, and matching outputs; --no-demo skips it. With
# the demo it also runs examples/span_decode (one decode over a span of every
# node, weights sharded): the span must have one member per node, every
# shard on its own node, and the tokens of the one-domain reference. And
# `nxr demo` (the language model) on a tiny decoder: every domain serves,
# its weights and KV cache on its own node (weights_on_node, kv_on_node 1.0),
# and with --span every sequence over every node, each node's shards on it
# (shards_on_node 1.0), the tokens those of the one-domain engines.
# Under TCG on a 2-CPU host a boot takes 10-40 s, the whole suite a few
# minutes per VM.
set -euo pipefail

cd "$(dirname "$0")/.."
repo=$PWD
NUMA_VM=${NUMA_VM:-}
if [[ -z $NUMA_VM ]]; then
    for c in "$repo/../shared/tools/numa-vm" /work/shared/tools/numa-vm; do
        [[ -f $c ]] && { NUMA_VM=$c; break; }
    done
fi
[[ -n $NUMA_VM && -f $NUMA_VM ]] || {
    echo "vm_test.sh: numa-vm not found (set NUMA_VM)" >&2
    exit 2
}

node_counts=(2 4)
tagged=0
demo=1
repeat=1
targets=()
while (($#)); do
    case $1 in
        --nodes) node_counts=($2); shift 2 ;;
        --tagged) tagged=1; shift ;;
        --no-demo) demo=0; shift ;;
        --repeat) repeat=$2; shift 2 ;;
        -h|--help) sed -n '2,20p' "$0"; exit 0 ;;
        *) targets+=("$1"); shift ;;
    esac
done
[[ $repeat =~ ^[1-9][0-9]*$ ]] || { echo "vm_test.sh: --repeat wants a positive count, not '$repeat'" >&2; exit 2; }
# What the VMs run by default: the tests whose outcome can depend on the
# machine's layout (domains per node, CPU ids, memory nodes, placement, one
# runtime beside another), not the ones that compute the same on any layout.
# Left out by name (so a test keeps its place in the list when it moves):
# pure data and protocol tests over CPU-set bitmaps, kernel arithmetic
# (TCG emulates the vector units slowly: gemm_test alone took minutes), and
# the stress, fault and soak runs; all of them run in stages 1-5 and 10.
# The 4-node VM (1 CPU a node) runs the tests tagged "numa_vm" and those of
# tests/runtime, where domains are built per node: that is where one-CPU
# domains and more than two nodes break assumptions. Explicit targets or
# --tagged run the same list in every VM.
not_layout='^(arbiter_test|cpu_quota_test|cpuset_test|decl_parse_test|plan_test|sys_test|version_test|size_class_test|registry_test|gemm_test|gemm_small_test|norm_test|elementwise_test|reduce_test|fpenv_test|ctx_fpenv_test|ctx_numeric_test|ctx_openblas_test|ctx_rules_test|weights_test|weights_format_test|ctx_weights_format_test|openblas_test|openblas_threads_test|provider_test|rules_test|soak_test|fault_loop_test|bad_input_test|stress_test|submit_stress_test)$'
declare -A only_in=() # node count -> a query narrowing the list there
if ((${#targets[@]} == 0)); then
    if ((tagged)); then
        query='attr(tags, "numa_vm", tests(//...))'
    else
        query="kind(cc_test, tests(//...)) except attr(name, \"$not_layout\", tests(//...))"
        only_in[4]='attr(tags, "numa_vm", tests(//...)) + tests(//tests/runtime/...)'
    fi
    mapfile -t targets < <(bazel query "$query" 2>/dev/null | sort)
    ((${#targets[@]})) || { echo "vm_test.sh: no test matches $query" >&2; exit 2; }
fi

build=("${targets[@]}")
((demo)) && build+=(//tools:nxr //examples:span_decode)
bazel build --color=no --curses=no "${build[@]}" >/dev/null 2>&1 ||
    bazel build "${build[@]}"
bin_dir=$(bazel info bazel-bin 2>/dev/null)

work=$(mktemp -d "${TMPDIR:-/tmp}/nxr-vm.XXXXXX")
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/bin"
files=()
names=()
declare -A name_of=()
for t in "${targets[@]}"; do
    rel=${t#//}
    name=${rel##*:}
    src=$bin_dir/${rel%%:*}/$name
    # Two packages may hold a test of one name (tests/domains:peers_test and
    # tests/runtime:peers_test): the copy is named by its package too.
    pkg=${rel%%:*}
    pkg=${pkg#tests/}
    name=${pkg//\//-}-$name
    [[ -x $src ]] || { echo "vm_test.sh: $t: no binary at $src" >&2; exit 2; }
    # Without debug info the initramfs is a fraction of the size (TCG boots
    # it faster and node 0 holds it twice while booting).
    objcopy --strip-debug "$src" "$work/bin/$name" 2>/dev/null || cp "$src" "$work/bin/$name"
    files+=(--file "$work/bin/$name")
    names+=("$name")
    name_of[$t]=$name
done

if ((demo)); then
    objcopy --strip-debug "$bin_dir/tools/nxr" "$work/bin/nxr" 2>/dev/null ||
        cp "$bin_dir/tools/nxr" "$work/bin/nxr"
    files+=(--file "$work/bin/nxr")
    objcopy --strip-debug "$bin_dir/examples/span_decode" "$work/bin/span_decode" 2>/dev/null ||
        cp "$bin_dir/examples/span_decode" "$work/bin/span_decode"
    files+=(--file "$work/bin/span_decode")
fi

# The payload: runs each binary, prints one line each, the tail of a failing
# one's output, and the total. Plain POSIX sh (busybox's applets in the VM).
# write_suite path names...: the payload over those binaries.
write_suite() {
local suite=("${@:2}")
cat > "$1" <<EOF
#!/bin/sh
pass=0
fail=0
for round in \$(seq $repeat); do
for t in ${suite[*]}; do
    out=/tmp/\$t.log
    t0=\$(date +%s)
    NXR_TEST_NEED_NODE1=1 NXR_PEERS=off timeout 900 $work/bin/\$t >"\$out" 2>&1
    rc=\$?
    secs=\$((\$(date +%s) - t0))
    syn=\$(grep 'Synthesis:' "\$out" | tail -n 1 | sed 's/.*Synthesis: //')
    [ -n "\$syn" ] || syn=\$(tail -n 1 "\$out")
    if [ \$rc -eq 0 ]; then
        pass=\$((pass + 1))
        echo "vm: \$t: ok: \$syn (\${secs} s)"
    else
        fail=\$((fail + 1))
        echo "vm: \$t: FAILED (status \$rc): \$syn (\${secs} s)"
        grep -v '^\[----\]   *\$' "\$out" | tail -n 25 | sed 's/^/vm:   /'
    fi
done
done
if [ -x $work/bin/nxr ]; then
    # The demo check: its JSON on one line, checked on the host. --machine 0:
    # measuring the GEMM peak under TCG took 525 of the 4-node VM's 664 s.
    t0=\$(date +%s)
    if timeout 900 $work/bin/nxr demo --model mlp --requests 64 --clients 4 --batch 1-8 --hidden 64 \
        --layers 2 --machine 0 --span --json >/tmp/demo.json 2>/tmp/demo.err; then
        echo "vm-demo-json \$(cat /tmp/demo.json)"
        echo "vm: nxr demo ran (\$((\$(date +%s) - t0)) s)"
    else
        fail=\$((fail + 1))
        echo "vm: nxr demo: FAILED: \$(cat /tmp/demo.err)"
    fi
    # The language model (nxr demo's default) on a tiny decoder: every
    # domain serves, its weights and KV cache on its node; with --span every
    # sequence also over every node, each node's shards on it, the tokens
    # the one-domain engines' (checked on the host).
    t0=\$(date +%s)
    if timeout 900 $work/bin/nxr demo --dim 64 --hidden 176 --layers 2 --heads 4 --kv-heads 2 \
        --vocab 512 --prompt 3-20 --gen 2-9 --clients 4 --sequences 12 --kv-mib 4 \
        --step-tokens 8 --machine 0 --time-budget 0 --no-compare --span --json \
        >/tmp/llama.json 2>/tmp/llama.err; then
        echo "vm-llama-json \$(cat /tmp/llama.json)"
        echo "vm: nxr demo (llama) ran (\$((\$(date +%s) - t0)) s)"
    else
        fail=\$((fail + 1))
        echo "vm: nxr demo (llama): FAILED: \$(cat /tmp/llama.err)"
    fi
fi
if [ -x $work/bin/span_decode ]; then
    # One stream over every node (checked on the host: members, shards).
    t0=\$(date +%s)
    if timeout 900 $work/bin/span_decode >/tmp/span.out 2>&1 &&
        grep -q '^versus one domain: tokens identical' /tmp/span.out; then
        echo "vm-span: \$(head -n 1 /tmp/span.out) (\$((\$(date +%s) - t0)) s)"
    else
        fail=\$((fail + 1))
        echo "vm: span_decode: FAILED"
        tail -n 5 /tmp/span.out | sed 's/^/vm:   /'
    fi
fi
echo "vm suite: \$pass passed, \$fail failed"
[ \$fail -eq 0 ]
EOF
chmod +x "$1"
}

# One VM run, watched: a TCG guest that shows no sign of life within
# BOOT_WAIT seconds (seen rarely on a loaded host: the kernel never reaches
# /init) is stopped and booted again, at most three times.
BOOT_WAIT=${NXR_VM_BOOT_WAIT:-150}
run_vm() { # nodes cpus-per-node log suite-script
    local attempt pid t0 rc
    for attempt in 1 2 3; do
        bash "$NUMA_VM" --nodes "$1" --cpus-per-node "$2" --mem-per-node 512 --timeout 2400 \
            "${files[@]}" -- "$4" >"$3" 2>&1 &
        pid=$!
        t0=$SECONDS
        while kill -0 "$pid" 2>/dev/null; do
            if ((SECONDS - t0 > BOOT_WAIT)) && ! grep -q '^numa-vm: guest up' "$3"; then
                echo "vm_test.sh: no boot in ${BOOT_WAIT} s (attempt $attempt); restarting the VM"
                kill -TERM "$pid" 2>/dev/null
                break
            fi
            sleep 1
        done
        rc=0
        wait "$pid" || rc=$?
        grep -q '^numa-vm: guest up' "$3" && return "$rc"
    done
    return 125
}

status=0
for nodes in "${node_counts[@]}"; do
    cpn=$((nodes >= 4 ? 1 : 2))
    here=("${names[@]}")
    if [[ -n ${only_in[$nodes]:-} ]]; then
        here=()
        while read -r t; do
            [[ -n ${name_of[$t]:-} ]] && here+=("${name_of[$t]}")
        done < <(bazel query "${only_in[$nodes]}" 2>/dev/null | sort)
    fi
    write_suite "$work/run-suite-$nodes.sh" "${here[@]}"
    echo "== ${#here[@]} test binaries in a ${nodes}-node VM (${cpn} CPU(s) and 512 MiB per node)"
    start=$SECONDS
    rc=0
    run_vm "$nodes" "$cpn" "$work/vm-$nodes.log" "$work/run-suite-$nodes.sh" || rc=$?
    # Only numa-vm's own lines, the guest's banner and the payload's lines.
    grep -aE '^(vm|numa-vm|VM-EXIT)' "$work/vm-$nodes.log" | grep -vE '^vm-(demo|llama)-json ' || true
    if ((demo)); then
        grep -a '^vm-demo-json ' "$work/vm-$nodes.log" | tail -n 1 | cut -d' ' -f2- >"$work/demo-$nodes.json" || true
        python3 - "$work/demo-$nodes.json" "$nodes" <<'PY' || rc=1
import json, sys
try:
    d = json.load(open(sys.argv[1]))
except ValueError:
    sys.exit("vm: nxr demo check: no JSON from the VM")
nodes = int(sys.argv[2])
bad = []
if len(d["domains"]) != nodes:
    bad.append("%d domains for %d nodes" % (len(d["domains"]), nodes))
for x in d["domains"]:
    if x["weights_on_node"] != 1.0:
        bad.append("domain %d: weights_on_node %s" % (x["id"], x["weights_on_node"]))
    if x["placement"] != "verified" or not x["ran_on"] or not set(x["ran_on"]) <= set(x["cpus"]):
        bad.append("domain %d: placement %s, ran on %s, cpus %s" % (x["id"], x["placement"], x["ran_on"], x["cpus"]))
    if x["requests"] == 0:
        bad.append("domain %d served nothing" % x["id"])
if d["outputs_match"] is not True:
    bad.append("outputs differ: %s" % d["outputs"])
# --span: every request across every node, each domain's shard on its node.
s = d.get("span")
if d["config"].get("mode") != "span" or s is None or s["members"] != nodes:
    bad.append("span mode: %s" % s)
for x in d["domains"]:
    if x.get("shard_on_node") != 1.0:
        bad.append("domain %d: shard_on_node %s" % (x["id"], x.get("shard_on_node")))
for b in bad:
    print("vm: nxr demo check: FAILED:", b)
if not bad:
    print("vm: nxr demo check: ok: %s" % ", ".join("domain %d node %d cpus %s weights_on_node %.2f ran on %s"
          % (x["id"], x["node"], x["cpus"], x["weights_on_node"], x["ran_on"]) for x in d["domains"]))
sys.exit(1 if bad else 0)
PY
    fi
    if ((demo)); then
        grep -a '^vm-llama-json ' "$work/vm-$nodes.log" | tail -n 1 | cut -d' ' -f2- >"$work/llama-$nodes.json" || true
        python3 - "$work/llama-$nodes.json" "$nodes" <<'PY' || rc=1
import json, sys
try:
    d = json.load(open(sys.argv[1]))
except ValueError:
    sys.exit("vm: nxr demo (llama) check: no JSON from the VM")
nodes = int(sys.argv[2])
bad = []
if len(d["domains"]) != nodes:
    bad.append("%d domains for %d nodes" % (len(d["domains"]), nodes))
for x in d["domains"]:
    if x["weights_on_node"] != 1.0 or x["kv_on_node"] != 1.0:
        bad.append("domain %d: weights_on_node %s, kv_on_node %s"
                   % (x["id"], x["weights_on_node"], x["kv_on_node"]))
    if x["tokens"] == 0:
        bad.append("domain %d served nothing" % x["id"])
if d["sequences"] != 12:
    bad.append("%d of 12 sequences served" % d["sequences"])
# --span: one engine over every node, the weights sharded by node.
s = d.get("span")
if s is None or d.get("span_members") != nodes or s["sequences"] != 12:
    bad.append("span: %s over %s member(s)" % (s, d.get("span_members")))
for x in d["domains"]:
    if x.get("shards_on_node") != 1.0:
        bad.append("domain %d: shards_on_node %s" % (x["id"], x.get("shards_on_node")))
if d["tokens_match"] is not True:
    bad.append("the span's tokens differ from the one-domain engines'")
for b in bad:
    print("vm: nxr demo (llama) check: FAILED:", b)
if not bad:
    print("vm: nxr demo (llama) check: ok: %s" % ", ".join(
        "domain %d node %d tokens %d weights_on_node %.2f kv_on_node %.2f shards_on_node %.2f"
        % (x["id"], x["node"], x["tokens"], x["weights_on_node"], x["kv_on_node"],
           x["shards_on_node"])
        for x in d["domains"]))
sys.exit(1 if bad else 0)
PY
    fi
    if ((demo)); then
        span_line=$(grep -a '^vm-span: ' "$work/vm-$nodes.log" | tail -n 1 || true)
        if ! grep -q "^vm-span: span over $nodes domain(s)" <<< "$span_line" ||
            grep -qE 'on node (NO|unknown)' <<< "$span_line"; then
            echo "vm: span_decode check: FAILED: ${span_line:-no output}"
            rc=1
        fi
    fi
    echo "== ${nodes}-node VM: $( ((rc == 0)) && echo passed || echo "FAILED (status $rc)") in $((SECONDS - start)) s"
    ((rc == 0)) || status=1
done
exit "$status"
