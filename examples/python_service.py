#!/usr/bin/env python3
"""The demo's inference service (`nxr demo --model mlp`, service/) served from Python
through the nxr binding, beside the same service in plain numpy, in one run.

The model is the demo's: 8 MLP blocks (pre-norm RMSNorm, x W_up + b with
SiLU on even blocks and GELU on odd ones, W_down + b added to the residual)
and a softmax head, hidden 256, ffn 1024, vocab 512, its weights generated
from the seed with the demo's generator (splitmix64, mirrored here in
numpy: the same bits as service/model.c's svc_model_fill), and the same
request stream (batch sizes log-uniform over 1-16 rows, inputs from
(seed, index): service/stream.c).

Both paths have the same shape: one serving thread per domain taking the
requests queued at its domain, up to --max-batch rows at once, into one
forward pass, and closed-loop client threads (each sends one request,
waits for its answer, sends the next), requests spread over the domains
round robin. The nxr path opens one context per domain, binds its serving
thread to the domain, keeps the weights packed once per domain
(rt.pack) and the gammas and biases in a replica on the domain's node
(rt.replicate), and runs every step as one nxr kernel (GIL released).
The numpy path computes the same steps with numpy (its matmul on the
BLAS numpy links, OpenBLAS on Debian, with its default threads). The
paths alternate in rounds so that both see the same machine; each
request's outputs are compared between the paths (max |diff| <= 1e-4).

usage: python_service.py [--requests N] [--clients N] [--max-batch N]
       [--batch MIN-MAX] [--hidden N] [--layers N] [--seed N] [--domains SPEC]
       [--rounds N] [--short] [--json]
Needs the nxr package on the path (tools/install.sh prints the PYTHONPATH
line) and numpy.
"""
import argparse
import json
import math
import os
import sys
import threading
import time

import numpy as np

import nxr

VOCAB = 512
RMS_EPS = np.float32(1e-5)
M64 = (1 << 64) - 1
GOLDEN = 0x9E3779B97F4A7C15


# ---- the demo's generator (service/model.c, service/stream.c) -------------
def _mix(z):
    """splitmix64's output function over a uint64 array."""
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


class Stream:
    """A splitmix64 state drawing uniform floats in [-1, 1) (24 bits)."""

    def __init__(self, state):
        self.state = state & M64

    def fill(self, n, centre, spread):
        steps = np.arange(1, n + 1, dtype=np.uint64)
        with np.errstate(over="ignore"):
            z = _mix(np.uint64(self.state) + steps * np.uint64(GOLDEN))
        self.state = (self.state + n * GOLDEN) & M64
        u = ((z >> np.uint64(40)).astype(np.int64) - (1 << 23)).astype(np.float32) / np.float32(1 << 23)
        # float arithmetic as the C code's (no contraction): spread * u, then + centre.
        return np.float32(centre) + np.float32(spread) * u


class Model:
    """The weights of one seed, as one float32 array laid out block by block
    (svc_model_fill's order), and named views into it."""

    def __init__(self, hidden, layers, seed):
        self.h, self.f, self.layers, self.vocab = hidden, 4 * hidden, layers, VOCAB
        h, f = self.h, self.f
        up, down = np.float32(1) / np.sqrt(np.float32(h)), np.float32(1) / np.sqrt(np.float32(f))
        s = Stream(seed)
        parts = []
        for _ in range(layers):
            parts += [s.fill(h, 1.0, 0.05), s.fill(h * f, 0.0, up), s.fill(f, 0.0, 0.02),
                      s.fill(f * h, 0.0, down), s.fill(h, 0.0, 0.02)]
        parts += [s.fill(h, 1.0, 0.05), s.fill(h * VOCAB, 0.0, up), s.fill(VOCAB, 0.0, 0.02)]
        self.flat = np.concatenate(parts)

    def views(self, flat):
        """[(gamma, w_up, b_up, w_down, b_down) per block], (gamma, w_head, b_head) of flat."""
        h, f, v = self.h, self.f, self.vocab
        blocks, o = [], 0

        def take(n, shape=None):
            nonlocal o
            a = flat[o:o + n]
            o += n
            return a.reshape(shape) if shape else a

        for _ in range(self.layers):
            blocks.append((take(h), take(h * f, (h, f)), take(f), take(f * h, (f, h)), take(h)))
        head = (take(h), take(h * v, (h, v)), take(v))
        return blocks, head

    @property
    def bytes(self):
        return self.flat.nbytes


def stream_rows(seed, index, lo, hi):
    """Rows of request `index` (svc_stream_rows: log-uniform over [lo, hi])."""
    if lo == hi:
        return lo
    z = (seed + (index + 1) * GOLDEN) & M64
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M64
    z ^= z >> 31
    u = (z >> 11) / 9007199254740992.0
    a, b = math.log(lo), math.log(hi + 1.0)
    return min(max(int(math.exp(a + u * (b - a))), lo), hi)


def request_input(seed, index, rows, hidden):
    state = seed ^ ((index * 0xD1B54A32D192ED03) & M64) ^ 0x5851F42D4C957F2D
    return Stream(state).fill(rows * hidden, 0.0, 1.0).reshape(rows, hidden)


# ---- the two forward passes ---------------------------------------------
class NxrReplica:
    """One domain's model: packed weight matrices (read by sgemm_packed on
    this domain) and a replica of the whole array for the gammas and
    biases, with scratch for a pass of up to max_rows rows, all in the
    domain's node memory."""

    def __init__(self, rt, ctx, model, packed, replica, max_rows):
        self.ctx, self.model, self.packed = ctx, model, packed
        self.blocks, self.head = model.views(replica)
        self.replica = replica
        h, f = model.h, model.f
        self.x, self.t = ctx.empty((max_rows, h)), ctx.empty((max_rows, h))
        self.u, self.logits = ctx.empty((max_rows, f)), ctx.empty((max_rows, VOCAB))

    def forward(self, inp, out):
        ctx, n = self.ctx, inp.shape[0]
        x, t, u, logits = self.x[:n], self.t[:n], self.u[:n], self.logits[:n]
        x[...] = inp
        for i, (gamma, _w_up, b_up, _w_down, b_down) in enumerate(self.blocks):
            ctx.rmsnorm(x, gamma, eps=RMS_EPS, out=t)
            ctx.sgemm_packed(t, self.packed[2 * i], bias=b_up,
                             activation="silu" if i % 2 == 0 else "gelu", out=u)
            ctx.sgemm_packed(u, self.packed[2 * i + 1], bias=b_down, beta=1.0, out=x)
        gamma, _w_head, b_head = self.head
        ctx.rmsnorm(x, gamma, eps=RMS_EPS, out=t)
        ctx.sgemm_packed(t, self.packed[-1], bias=b_head, out=logits)
        ctx.softmax(logits, out=out)


def _silu(v):
    return v / (np.float32(1) + np.exp(-v))


def _gelu(v):
    c = np.float32(math.sqrt(2.0 / math.pi))
    return np.float32(0.5) * v * (np.float32(1) + np.tanh(c * (v + np.float32(0.044715) * v * v * v)))


class NumpyReplica:
    """The same steps in plain numpy (float32)."""

    def __init__(self, model):
        self.blocks, self.head = model.views(model.flat)

    @staticmethod
    def _rmsnorm(x, gamma):
        return x / np.sqrt(np.mean(x * x, axis=1, keepdims=True) + RMS_EPS) * gamma

    def forward(self, inp, out):
        x = inp.copy()
        for i, (gamma, w_up, b_up, w_down, b_down) in enumerate(self.blocks):
            u = self._rmsnorm(x, gamma) @ w_up + b_up
            u = _silu(u) if i % 2 == 0 else _gelu(u)
            x += u @ w_down + b_down
        gamma, w_head, b_head = self.head
        logits = self._rmsnorm(x, gamma) @ w_head + b_head
        e = np.exp(logits - logits.max(axis=1, keepdims=True))
        out[...] = e / e.sum(axis=1, keepdims=True)


# ---- serving -------------------------------------------------------------
class Request:
    __slots__ = ("index", "input", "output", "sent", "latency", "done", "error")

    def __init__(self, index, inp):
        self.index, self.input = index, inp
        self.output = np.empty((inp.shape[0], VOCAB), np.float32)
        self.done = threading.Event()
        self.error = None


class Server:
    """One domain's serving thread: takes what is queued, up to max_rows
    rows, as one forward pass, and answers each request."""

    def __init__(self, make_replica, max_rows, bind=None):
        self.queue, self.cond = [], threading.Condition()
        self.max_rows, self.stopping = max_rows, False
        self.passes = self.requests = 0
        self.ran_on = set()
        self.ready = threading.Event()
        self.failure = None
        self.thread = threading.Thread(target=self._run, args=(make_replica, bind), daemon=True)
        self.thread.start()
        # Bounded: the replica is built by the thread (binding, packing); a
        # failure is carried back here.
        self.ready.wait()
        if self.failure:
            raise self.failure

    def submit(self, r):
        with self.cond:
            self.queue.append(r)
            self.cond.notify()

    def stop(self):
        with self.cond:
            self.stopping = True
            self.cond.notify()
        self.thread.join()

    def _run(self, make_replica, bind):
        try:
            with bind() if bind else _nothing():
                replica = make_replica()
                self.ready.set()
                self._serve(replica)
        except BaseException as e:  # noqa: B902 -- reported to the creator
            self.failure = e
            self.ready.set()

    def _serve(self, replica):
        self.ran_on = os.sched_getaffinity(0)  # the CPUs it serves on (bound: its domain's)
        buf_in = np.empty((self.max_rows, replica_hidden(replica)), np.float32)
        buf_out = np.empty((self.max_rows, VOCAB), np.float32)
        while True:
            with self.cond:
                while not self.queue and not self.stopping:
                    self.cond.wait()  # woken by submit or stop
                if not self.queue:
                    return
                batch, rows = [], 0
                while self.queue and (not batch or rows + self.queue[0].input.shape[0] <= self.max_rows):
                    r = self.queue.pop(0)
                    batch.append(r)
                    rows += r.input.shape[0]
            try:
                if len(batch) == 1:
                    replica.forward(batch[0].input, batch[0].output)
                else:
                    o = 0
                    for r in batch:
                        n = r.input.shape[0]
                        buf_in[o:o + n] = r.input
                        o += n
                    replica.forward(buf_in[:rows], buf_out[:rows])
                    o = 0
                    for r in batch:
                        n = r.input.shape[0]
                        r.output[...] = buf_out[o:o + n]
                        o += n
            except Exception as e:  # answered, with the failure
                for r in batch:
                    r.error = e
            self.passes += 1
            self.requests += len(batch)
            now = time.perf_counter()
            for r in batch:
                r.latency = now - r.sent
                r.done.set()


class _nothing:
    def __enter__(self):
        return None

    def __exit__(self, *exc):
        return False


def replica_hidden(replica):
    return replica.blocks[0][0].shape[0]


def serve_round(servers, requests, clients):
    """Closed-loop clients over the requests (in order); returns wall seconds."""
    lock, next_i = threading.Lock(), [0]

    def client():
        while True:
            with lock:
                i = next_i[0]
                next_i[0] += 1
            if i >= len(requests):
                return
            r = requests[i]
            r.sent = time.perf_counter()
            servers[i % len(servers)].submit(r)
            r.done.wait()  # answered exactly once by its server, error or not

    ts = [threading.Thread(target=client) for _ in range(clients)]
    start = time.perf_counter()
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    return time.perf_counter() - start


def percentile(sorted_ms, q):
    if not sorted_ms:
        return float("nan")
    return sorted_ms[min(len(sorted_ms) - 1, int(math.ceil(q * len(sorted_ms))) - 1)]


def summary(latencies, wall, servers):
    ms = sorted(1e3 * v for v in latencies)
    return {
        "requests": len(ms),
        "requests_per_s": round(len(ms) / wall, 1) if wall > 0 else 0.0,
        "p50_ms": round(percentile(ms, 0.50), 4),
        "p95_ms": round(percentile(ms, 0.95), 4),
        "p99_ms": round(percentile(ms, 0.99), 4),
        "wall_s": round(wall, 4),
        "passes": sum(s.passes for s in servers),
    }


def cpulist(cpus):
    out, cpus = [], sorted(cpus)
    i = 0
    while i < len(cpus):
        j = i
        while j + 1 < len(cpus) and cpus[j + 1] == cpus[j] + 1:
            j += 1
        out.append(str(cpus[i]) if i == j else "%d-%d" % (cpus[i], cpus[j]))
        i = j + 1
    return ",".join(out)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--requests", type=int, default=1000, help="per path (default 1000)")
    ap.add_argument("--clients", type=int, default=4)
    ap.add_argument("--max-batch", type=int, default=64, help="rows one pass coalesces")
    ap.add_argument("--batch", default="1-16", help="rows per request MIN-MAX (log-uniform)")
    ap.add_argument("--hidden", type=int, default=256)
    ap.add_argument("--layers", type=int, default=8)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--domains", default=None, help="the NXR_DOMAINS grammar (default: one per node)")
    ap.add_argument("--rounds", type=int, default=4, help="alternating rounds per path")
    ap.add_argument("--short", action="store_true", help="a check: 120 requests, 2 layers, 2 rounds")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args(argv)
    if a.short:
        a.requests, a.layers, a.rounds = 120, 2, 2
    try:
        lo, hi = (int(v) for v in a.batch.split("-"))
        assert 1 <= lo <= hi <= a.max_batch
    except (ValueError, AssertionError):
        ap.error("--batch: MIN-MAX with 1 <= MIN <= MAX <= --max-batch")
    for name in ("requests", "clients", "max_batch", "hidden", "layers", "rounds"):
        if getattr(a, name) < 1:
            ap.error("--%s: must be >= 1" % name.replace("_", "-"))

    model = Model(a.hidden, a.layers, a.seed)
    requests = [(i, request_input(a.seed, i, stream_rows(a.seed, i, lo, hi), a.hidden))
                for i in range(a.requests)]
    rt = nxr.Runtime(domains=a.domains)
    doms = rt.domains
    # Weights: packed once per domain, gammas and biases in a replica per domain.
    blocks, head = model.views(model.flat)
    mats = [m for b in blocks for m in (b[1], b[3])] + [head[1]]
    packed = [rt.pack(np.ascontiguousarray(m)) for m in mats]
    replicas = rt.replicate(model.flat)

    nxr_servers = []
    for d, rep in zip(doms, replicas):
        ctx = rt.context(d.id)

        def make(ctx=ctx, rep=rep):
            return NxrReplica(rt, ctx, model, packed, rep, a.max_batch)

        nxr_servers.append((Server(make, a.max_batch, bind=ctx.bind), ctx, rep))
    np_servers = [Server(lambda: NumpyReplica(model), a.max_batch) for _ in doms]

    servers = {"nxr": [s for s, _, _ in nxr_servers], "numpy": np_servers}
    latencies = {"nxr": [], "numpy": []}
    walls = {"nxr": 0.0, "numpy": 0.0}
    outputs = {"nxr": {}, "numpy": {}}
    errors = []
    per_round = math.ceil(a.requests / a.rounds)
    for k in range(a.rounds):
        chunk = requests[k * per_round:(k + 1) * per_round]
        if not chunk:
            break
        for name in ("nxr", "numpy"):  # the same requests, one path after the other
            reqs = [Request(i, x) for i, x in chunk]
            walls[name] += serve_round(servers[name], reqs, a.clients)
            for r in reqs:
                if r.error is not None:
                    errors.append("%s request %d: %s" % (name, r.index, r.error))
                    continue
                latencies[name].append(r.latency)
                outputs[name][r.index] = r.output
    common = sorted(set(outputs["nxr"]) & set(outputs["numpy"]))
    diff = max((float(np.max(np.abs(outputs["nxr"][i] - outputs["numpy"][i]))) for i in common),
               default=float("nan"))
    tolerance = 1e-4
    match = bool(common) and not errors and diff <= tolerance and len(common) == a.requests

    ns = servers["nxr"]
    res_nxr = summary(latencies["nxr"], walls["nxr"], ns)
    res_np = summary(latencies["numpy"], walls["numpy"], np_servers)
    domains = []
    for d, (s, ctx, rep) in zip(doms, nxr_servers):
        where = nxr.nodes(rep)
        pages = sum(where.values())
        domains.append({
            "id": d.id, "node": d.node, "cpus": list(d.cpus), "requests": s.requests,
            "passes": s.passes, "weights_pages": pages,
            "weights_on_node": round(where.get(d.node, 0) / pages, 4) if d.node >= 0 else None,
            "ran_on": sorted(s.ran_on),
        })
    for s in ns + np_servers:
        s.stop()
    for _, ctx, _ in nxr_servers:
        ctx.close()
    for p in packed:
        p.close()
    del replicas, nxr_servers
    rt.close()

    ratio = lambda x, y: round(x / y, 3) if y else None  # noqa: E731
    result = dict(res_nxr)
    result.update({
        "numpy": res_np,
        "outputs_match": match,
        "max_abs_diff": diff,
        "tolerance": tolerance,
        "requests_compared": len(common),
        "errors": errors[:10],
        "domains": domains,
        "ratios": {"rps_nxr_over_numpy": ratio(res_nxr["requests_per_s"], res_np["requests_per_s"]),
                   "p99_nxr_over_numpy": ratio(res_nxr["p99_ms"], res_np["p99_ms"])},
        "config": {"requests": a.requests, "clients": a.clients, "max_batch": a.max_batch,
                   "batch": [lo, hi], "hidden": a.hidden, "layers": a.layers, "vocab": VOCAB,
                   "seed": a.seed, "rounds": a.rounds, "weights": "packed",
                   "nxr": nxr.library_version, "numpy": np.__version__},
        "loadavg": open("/proc/loadavg").read().split()[:3],
    })
    if a.json:
        print(json.dumps(result))
    else:
        report(result, model, a)
    return 0 if match else 1


def report(r, model, a):
    c = r["config"]
    print("python_service: %d MLP blocks, hidden %d (ffn %d), vocab %d: %.1f MiB of weights per replica"
          % (c["layers"], c["hidden"], 4 * c["hidden"], VOCAB, model.bytes / 2 ** 20))
    print("                %d requests per path, batch %d-%d rows (log-uniform), %d clients, seed %d, "
          "%d rounds" % (c["requests"], c["batch"][0], c["batch"][1], c["clients"], c["seed"], c["rounds"]))
    print("                up to %d rows per forward pass, nxr %s (packed weights), numpy %s"
          % (c["max_batch"], c["nxr"], c["numpy"]))
    print()
    print("  %-6s %-5s %-10s %8s %9s  %s" % ("domain", "node", "cpus", "requests", "passes",
                                            "weights on node"))
    for d in r["domains"]:
        on = "%.1f%% of %d pg" % (100 * d["weights_on_node"], d["weights_pages"]) \
            if d["weights_on_node"] is not None else "no node"
        print("  %-6d %-5d %-10s %8d %9d  %s, served on %s" % (d["id"], d["node"], cpulist(d["cpus"]),
                                                           d["requests"], d["passes"], on,
                                                           cpulist(d["ran_on"]) or "?"))
    print()
    print("  %-44s %6s %8s %8s %8s" % ("path", "req/s", "p50 ms", "p95 ms", "p99 ms"))
    for label, p in (("nxr: one context per domain, from Python", r),
                     ("numpy: the same service, numpy's matmul", r["numpy"])):
        print("  %-44s %6.0f %8.3f %8.3f %8.3f" % (label, p["requests_per_s"], p["p50_ms"],
                                                  p["p95_ms"], p["p99_ms"]))
    print()
    print("outputs: nxr against numpy over %d requests, max |diff| %.2g, tolerance %g: %s"
          % (r["requests_compared"], r["max_abs_diff"], r["tolerance"],
             "match" if r["outputs_match"] else "MISMATCH"))
    for e in r["errors"]:
        print("  error: %s" % e)
    q = r["ratios"]
    print("ratios (same run, paths alternating): req/s nxr / numpy %.2f; p99 nxr / numpy %.2f"
          % (q["rps_nxr_over_numpy"] or float("nan"), q["p99_nxr_over_numpy"] or float("nan")))
    print("load average %s" % " ".join(r["loadavg"]))


if __name__ == "__main__":
    sys.exit(main())
