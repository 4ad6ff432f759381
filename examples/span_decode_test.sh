#!/usr/bin/env bash
# examples/span_decode decodes over a span of every domain and on one domain,
# and fails when the two disagree (tokens, or logits past the tolerance).
# Run on this machine's own layout, then over declared domains on the
# allowed CPUs (three on the first one, so it runs under `taskset -c 1` too;
# one per CPU when there are two).
set -euo pipefail
bin=$1
cpus=$(taskset -pc $$ | sed 's/.*: //')
first=$(cut -d, -f1 <<< "$cpus" | cut -d- -f1)
run() {
    echo "== NXR_DOMAINS=${NXR_DOMAINS:-<one per node>}"
    out=$("$bin")
    echo "$out"
    grep -q "^versus one domain: tokens identical" <<< "$out"
}
unset NXR_DOMAINS NXR_TOPOLOGY
run
export NXR_DOMAINS="0:$first;1:$first shared;2:$first shared"
run
grep -q "^span over 3 domain(s)" <<< "$out"
second=$(awk -v c="$cpus" 'BEGIN {
    n = split(c, parts, ",")
    for (i = 1; i <= n; i++) {
        if (split(parts[i], r, "-") == 2) { for (x = r[1]; x <= r[2]; x++) ids[k++] = x }
        else ids[k++] = parts[i]
    }
    if (k > 1) print ids[1]
}')
if [[ -n $second ]]; then
    export NXR_DOMAINS="0:$first;1:$second"
    run
fi
