#!/usr/bin/env bash
# `nxr top --once --json` over helper processes (top_helper.c) in a registry
# of the test's own (XDG_RUNTIME_DIR): it sees a second process with its
# domains, and that process's counters once it runs work (also under a
# one-CPU budget, where no operation takes a permit), and a domain attached
# after creation with its counters; it flags CPU sets
# two processes share; a process killed with SIGKILL leaves its page behind,
# which the next read removes (with its entry) and no longer lists; a page
# open to others, a symlink and another user's page are not believed;
# NXR_PEERS=off publishes nothing; the live view on a terminal (a pty) is
# raw while it runs and restored after q and after SIGINT. Bad flags exit 2
# with one line. Every step is ordered through pipes and output: no sleeps.
set -euo pipefail
nxr=$1
helper=$2

export XDG_RUNTIME_DIR="$TEST_TMPDIR/xdg"
mkdir -p -m 0700 "$XDG_RUNTIME_DIR"
reg="$XDG_RUNTIME_DIR/nxr-peers"
export NXR_PEERS=quiet # the helpers overlap on purpose: no warning lines

# ---- bad flags: exit 2, one line, nothing on stdout ------------------------
for args in "--bogus" "--interval" "--interval 5" "--interval x" "--interval=" "--json"; do
    set +e
    # shellcheck disable=SC2086
    "$nxr" top $args > out.txt 2> err.txt
    rc=$?
    set -e
    [ "$rc" -eq 2 ] || { echo "nxr top $args: exit $rc, expected 2"; cat err.txt; exit 1; }
    [ "$(wc -l < err.txt)" -eq 1 ] || { echo "nxr top $args: not one line:"; cat err.txt; exit 1; }
    [ ! -s out.txt ] || { echo "nxr top $args: wrote to stdout"; exit 1; }
done

# ---- helpers: each on a pair of fifos, "ready PID" once registered --------
# start NAME [ENV...]: sets <NAME>_pid, fds: NAME's stdin on the fd in
# <NAME>_in, its stdout on <NAME>_out.
start() {
    local name=$1
    shift
    mkfifo "$name.in" "$name.out"
    env "$@" "$helper" < "$name.in" > "$name.out" &
    eval "${name}_proc=$!"
    local in out
    exec {in}> "$name.in"
    exec {out}< "$name.out"
    eval "${name}_in=$in ${name}_out=$out"
    local word pid
    read -r word pid <&"$out"
    [ "$word" = ready ] || { echo "helper $name: '$word'"; exit 1; }
    eval "${name}_pid=$pid"
}

top_json() { # top_json FILE: one read of two samples, 10 ms apart
    "$nxr" top --once --json --interval 10 > "$1"
}

start A
start B

# ---- A and B listed, with their domains; their CPU sets overlap ----------
top_json both.json
python3 - both.json "$A_pid" "$B_pid" <<'PY'
import json, os, sys
top = json.load(open(sys.argv[1]))
a, b = int(sys.argv[2]), int(sys.argv[3])
pids = [r["pid"] for r in top["runtimes"]]
assert pids.count(a) == 1 and pids.count(b) == 1, (pids, a, b)
allowed = sorted(os.sched_getaffinity(a))
for r in top["runtimes"]:
    assert "top_helper" in r["command"], r["command"]
    assert r["domains"], r
    other = b if r["pid"] == a else a
    for d in r["domains"]:
        for k in ("id", "node", "cpus", "budget", "budget_limit", "busy_pct", "spin_pct",
                  "regions_per_s", "tasks_per_s", "admission_waits_per_s", "weight_gb_per_s"):
            assert k in d, (k, d)
        assert d["budget"] >= 1 and d["workers"] >= 1, d
        # Both processes' domains cover the same allowed CPUs.
        assert ("pid %d: " % other) in d["overlap"], d
assert top["refused"] == 0, top
print("nxr top: A %d and B %d listed, overlapping" % (a, b))
PY

# ---- A runs work: its counters move ----------------------------------------
echo busy >&"$A_in"
read -r ack <&"$A_out"
[ "$ack" = busy ]
# A answers a request at its next region's end; a loaded machine may take
# longer than a read's bound, so read until it has answered (no sleep).
for try in $(seq 1 50); do
    top_json busy.json
    if python3 - busy.json "$A_pid" <<'PY'
import json, sys
top = json.load(open(sys.argv[1]))
a = [r for r in top["runtimes"] if r["pid"] == int(sys.argv[2])]
assert len(a) == 1, top
# Tasks: counted on every path (regions are not, where a one-CPU budget
# runs every loop on the caller alone).
sys.exit(0 if a[0]["answered"] and sum(d["tasks"] for d in a[0]["domains"]) > 0 else 1)
PY
    then
        echo "nxr top: A's tasks counted (read $try)"
        break
    fi
    [ "$try" -lt 50 ] || { echo "A never answered"; cat busy.json; exit 1; }
done
echo idle >&"$A_in"

# ---- a domain B's host attaches after creation is listed, and its own
# operations answer a read (nothing else runs in B meanwhile) ---------------
echo attach >&"$B_in"
read -r ack attached_id <&"$B_out"
[ "$ack" = attached ] || { echo "B: '$ack'"; exit 1; }
echo busy-attached >&"$B_in"
read -r ack <&"$B_out"
[ "$ack" = busy-attached ]
for try in $(seq 1 50); do
    top_json attached.json
    if python3 - attached.json "$B_pid" "$attached_id" <<'PY'
import json, sys
top = json.load(open(sys.argv[1]))
b = [r for r in top["runtimes"] if r["pid"] == int(sys.argv[2])]
assert len(b) == 1, top
ids = [d["id"] for d in b[0]["domains"]]
assert ids.count(int(sys.argv[3])) == 1, "the attached domain %s not listed: %s" % (sys.argv[3], ids)
d = [d for d in b[0]["domains"] if d["id"] == int(sys.argv[3])][0]
# Caller-managed: no CPU set; a host's executor has no built-in workers.
assert d["cpus"] == "" and d["workers"] == 0, d
sys.exit(0 if b[0]["answered"] and d["tasks"] > 0 else 1)
PY
    then
        echo "nxr top: B's attached domain $attached_id listed, its tasks counted (read $try)"
        break
    fi
    [ "$try" -lt 50 ] || { echo "B never answered for its attached domain"; cat attached.json; exit 1; }
done
echo idle >&"$B_in"

# ---- SIGKILL: the page stays; the next read removes it and its entry -----
kill -KILL "$A_proc"
wait "$A_proc" || true
ls "$reg/$A_pid".*.page > /dev/null || { echo "A's page did not outlive it"; exit 1; }
top_json killed.json
python3 - killed.json "$A_pid" "$B_pid" <<'PY'
import json, sys
top = json.load(open(sys.argv[1]))
pids = [r["pid"] for r in top["runtimes"]]
assert int(sys.argv[2]) not in pids and int(sys.argv[3]) in pids, pids
assert top["stale"] >= 1, top
for r in top["runtimes"]:
    for d in r["domains"]:
        assert d["overlap"] == "", d  # A is gone
PY
if ls "$reg/$A_pid".* > /dev/null 2>&1; then
    echo "A's page or entry left behind:"
    ls -la "$reg"
    exit 1
fi

# ---- pages not to be believed: each a copy of B's live page ---------------
page_b=$(ls "$reg/$B_pid".*.page)
cp "$page_b" "$reg/$B_pid.77.page"
chmod 0644 "$reg/$B_pid.77.page" # open to others
ln -s "$page_b" "$reg/$B_pid.78.page"
forged=2
if [ "$(id -u)" -eq 0 ]; then # another user's: only root can make one
    cp "$page_b" "$reg/$B_pid.79.page"
    chmod 0600 "$reg/$B_pid.79.page"
    chown 65534 "$reg/$B_pid.79.page"
    forged=3
else
    echo "nxr top: another user's page not tried (not root: cannot chown)"
fi
top_json forged.json
python3 - forged.json "$B_pid" "$forged" <<'PY'
import json, sys
top = json.load(open(sys.argv[1]))
pids = [r["pid"] for r in top["runtimes"]]
assert pids.count(int(sys.argv[2])) == 1, pids
assert top["refused"] == int(sys.argv[3]), top
print("nxr top: %d forged pages refused" % top["refused"])
PY
rm -f "$reg/$B_pid.77.page" "$reg/$B_pid.78.page" "$reg/$B_pid.79.page"

# ---- NXR_PEERS=off: nothing published --------------------------------------
start C NXR_PEERS=off
if ls "$reg/$C_pid".* > /dev/null 2>&1; then
    echo "NXR_PEERS=off published:"
    ls -la "$reg"
    exit 1
fi
top_json off.json
python3 - off.json "$C_pid" <<'PY'
import json, sys
top = json.load(open(sys.argv[1]))
assert int(sys.argv[2]) not in [r["pid"] for r in top["runtimes"]], top
PY

# ---- the live view on a terminal: raw while it runs, restored on q and on
# SIGINT (ordered by its output: raw mode is set before the first table) ----
python3 - "$nxr" <<'PY'
import fcntl, os, pty, signal, sys, termios, threading
nxr = sys.argv[1]

def live(end):
    master, slave = os.openpty()
    pid = os.fork()
    if pid == 0:
        os.setsid()
        fcntl.ioctl(slave, termios.TIOCSCTTY, 0)
        for fd in (0, 1, 2):
            os.dup2(slave, fd)
        os.execv(nxr, [nxr, "top", "--interval", "20"])
    assert termios.tcgetattr(slave)[3] & termios.ICANON, "the terminal starts cooked"
    seen = threading.Event()
    out = bytearray()
    def drain():  # reads all it prints, so that it never blocks on the terminal
        while True:
            try:
                chunk = os.read(master, 4096)
            except OSError:
                return
            out.extend(chunk)
            if b"WARNING" in out:
                seen.set()
    threading.Thread(target=drain, daemon=True).start()
    seen.wait()
    lflag = termios.tcgetattr(slave)[3]
    assert not lflag & termios.ICANON and not lflag & termios.ECHO, "not raw while live"
    if end == "q":
        os.write(master, b"q")
    else:
        os.kill(pid, signal.SIGINT)
    _, status = os.waitpid(pid, 0)
    lflag = termios.tcgetattr(slave)[3]
    assert lflag & termios.ICANON and lflag & termios.ECHO, "terminal left raw after " + end
    if end == "q":
        assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0, status
    else:
        assert os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGINT, status
    print("nxr top: live view ended by %s, terminal restored" % end)

live("q")
live("SIGINT")
PY

# ---- the helpers end on EOF: their pages go with them ----------------------
exec {B_in}>&- {C_in}>&-
wait "$B_proc" "$C_proc"
if ls "$reg"/*.page > /dev/null 2>&1; then
    echo "pages left after a clean exit:"
    ls -la "$reg"
    exit 1
fi
echo "nxr top: ok"
