#!/usr/bin/env bash
# examples/metrics_http: started on a free port, it serves /metrics as a
# Prometheus page (one # TYPE per family, a task count per domain that
# never goes back between two scrapes while its stream of runs goes on),
# answers 404 elsewhere, and exits after the requests it was told to serve.
set -euo pipefail
server=$1
# The port line, read as it is printed (a blocking read: no polling).
coproc SERVER { "$server" --requests 3; }
pid=$SERVER_PID
trap 'kill "$pid" 2>/dev/null || true' EXIT
read -r word port <&"${SERVER[0]}"
[ "$word" = port ] && [ -n "$port" ] || { echo "no port line: '$word $port'"; exit 1; }
python3 - "$port" <<'PY'
import re, sys, urllib.error, urllib.request
port = sys.argv[1]
def scrape():
    page = urllib.request.urlopen("http://127.0.0.1:%s/metrics" % port).read().decode()
    types = [l.split()[2] for l in page.splitlines() if l.startswith("# TYPE ")]
    assert len(types) == len(set(types)), "a family twice"
    tasks = {}
    for l in page.splitlines():
        m = re.match(r'^nxr_domain_tasks_total\{domain="(\d+)",node="[^"]*"\} (\d+)$', l)
        if m:
            tasks[m.group(1)] = int(m.group(2))
    assert tasks, "no nxr_domain_tasks_total samples"
    return tasks
first = scrape()
try:
    urllib.request.urlopen("http://127.0.0.1:%s/other" % port)
    raise SystemExit("/other answered 200")
except urllib.error.HTTPError as e:
    assert e.code == 404, e.code
second = scrape()
assert all(second[d] >= first[d] for d in first), (first, second)
print("metrics_http: /metrics parsed twice, tasks %s -> %s; /other 404" % (first, second))
PY
wait "$pid"
