#!/usr/bin/env python3
"""The language model of `nxr demo` served from Python through the nxr binding:
a llama-architecture decoder (RMSNorm, Q/K/V/O with RoPE, grouped-query
attention over a KV cache, SwiGLU, classifier; random weights from a seed),
continuous batching with one serving thread per domain, beside the same
decoder in plain numpy serving one sequence at a time, in one run.

The nxr path opens one context per domain, binds its serving thread to the
domain, packs every matrix once per domain (rt.pack, in --weights' format)
and keeps each sequence's KV cache in the domain's memory (ctx.empty). A
step takes one token of every active sequence (the next prompt token, or the
last one it generated) as one row, runs the rows through every matrix as one
nxr_sgemm_packed call each (m = the active sequences: the weights are read
once per step for all of them), and attention per sequence over its own
cache. A sequence leaves when it has its tokens; a waiting one joins at the
next step (--clients: sequences in flight). The same engine with one
sequence per step ("unbatched") and the numpy engine run the same sequences;
the two nxr paths must make the same tokens (same kernels, greedy), numpy's
are counted (another summation order may part where two logits nearly tie).
The C engine behind `nxr demo` is service/llama_batch.c; this is its shape in
Python, its figures beside the C ones.

usage: python_llm.py [--dim N --hidden N --layers N --heads N --kv-heads N
       --vocab N] [--sequences N] [--clients N] [--prompt MIN-MAX]
       [--gen MIN-MAX] [--weights f32|bf16|q8] [--seed N] [--short] [--json]
Needs the nxr package on the path (tools/install.sh prints the PYTHONPATH
line) and numpy.
"""
import argparse
import json
import sys
import threading
import time

import numpy as np

import nxr

EPS = 1e-5


class Model:
    """Random weights of one seed, op(W) stored k x n (x @ W)."""

    def __init__(self, dim, hidden, layers, heads, kv_heads, vocab, seed):
        if dim % heads or heads % kv_heads or (dim // heads) % 2:
            raise ValueError("dim must split into heads of even size, heads into kv_heads")
        self.dim, self.hidden, self.layers, self.vocab = dim, hidden, layers, vocab
        self.heads, self.kv_heads, self.hs = heads, kv_heads, dim // heads
        self.kv = kv_heads * self.hs
        rng = np.random.default_rng(seed)

        def mat(k, n):
            return (rng.standard_normal((k, n)) / np.sqrt(k)).astype(np.float32)

        self.embed = rng.standard_normal((vocab, dim)).astype(np.float32)
        self.layer = [dict(att=np.ones(dim, np.float32), qkv=mat(dim, dim + 2 * self.kv),
                           o=mat(dim, dim), ffn=np.ones(dim, np.float32),
                           w13=mat(dim, 2 * hidden), w2=mat(hidden, dim))
                      for _ in range(layers)]
        self.final = np.ones(dim, np.float32)
        self.cls = mat(dim, vocab)
        inv = 1.0 / (10000.0 ** (np.arange(0, self.hs, 2, dtype=np.float64) / self.hs))
        self.inv_freq = inv


def rope(v, pos, heads, hs, inv_freq):
    """Rotates each head's pairs (v: heads*hs floats) by the position's angles."""
    x = v.reshape(heads, hs // 2, 2)
    ang = pos * inv_freq
    c, s = np.cos(ang).astype(np.float32), np.sin(ang).astype(np.float32)
    a, b = x[..., 0].copy(), x[..., 1].copy()
    x[..., 0], x[..., 1] = a * c - b * s, a * s + b * c


class Seq:
    def __init__(self, index, prompt, gen):
        self.index, self.prompt, self.gen = index, prompt, gen
        self.pos, self.out, self.kcache, self.vcache = 0, [], None, None

    def next_token(self):
        return self.prompt[self.pos] if self.pos < len(self.prompt) else self.out[-1]


def attention(m, q, seq, layer):
    """Causal attention of one row over its sequence's cache (grouped heads)."""
    t = seq.pos + 1
    k = seq.kcache[layer, :t].reshape(t, m.kv_heads, m.hs)
    v = seq.vcache[layer, :t].reshape(t, m.kv_heads, m.hs)
    qh = q.reshape(m.kv_heads, m.heads // m.kv_heads, m.hs)
    s = np.einsum("gjd,tgd->gjt", qh, k) / np.float32(np.sqrt(m.hs))
    s = np.exp(s - s.max(axis=-1, keepdims=True))
    s /= s.sum(axis=-1, keepdims=True)
    return np.einsum("gjt,tgd->gjd", s, v).reshape(m.dim)


class NumpyOps:
    def __init__(self, m):
        self.m = m

    def matmul(self, x, name, layer=None):
        w = self.m.cls if name == "cls" else self.m.layer[layer][name]
        return x @ w

    def rmsnorm(self, x, g):
        return (x / np.sqrt((x * x).mean(axis=1, keepdims=True) + EPS)) * g

    def cache(self, shape):
        return np.zeros(shape, np.float32)


class NxrOps:
    """The same steps on one domain: packed weights, nxr kernels, caches in
    the domain's memory."""

    def __init__(self, m, ctx, packed):
        self.m, self.ctx, self.packed = m, ctx, packed

    def matmul(self, x, name, layer=None):
        w = self.packed["cls"] if name == "cls" else self.packed[name][layer]
        return self.ctx.sgemm_packed(np.ascontiguousarray(x), w)

    def rmsnorm(self, x, g):
        return self.ctx.rmsnorm(np.ascontiguousarray(x), g, eps=EPS)

    def cache(self, shape):
        c = self.ctx.empty(shape)
        c[...] = 0
        return c


def step(m, ops, seqs):
    """One token of every sequence in seqs as one row each; returns logits."""
    x = m.embed[[s.next_token() for s in seqs]]
    for li, L in enumerate(m.layer):
        h = ops.rmsnorm(x, L["att"])
        qkv = ops.matmul(h, "qkv", li)
        att = np.empty_like(x)
        for r, s in enumerate(seqs):
            q, k, v = qkv[r, :m.dim], qkv[r, m.dim:m.dim + m.kv], qkv[r, m.dim + m.kv:]
            rope(q, s.pos, m.heads, m.hs, m.inv_freq)
            rope(k, s.pos, m.kv_heads, m.hs, m.inv_freq)
            s.kcache[li, s.pos], s.vcache[li, s.pos] = k, v
            att[r] = attention(m, q, s, li)
        x = x + ops.matmul(att, "o", li)
        h = ops.rmsnorm(x, L["ffn"])
        gu = ops.matmul(h, "w13", li)
        g, u = gu[:, :m.hidden], gu[:, m.hidden:]
        x = x + ops.matmul((g / (1 + np.exp(-g))) * u, "w2", li)
    return ops.matmul(ops.rmsnorm(x, m.final), "cls")


def serve(m, ops, seqs, max_active, seq_len):
    """Continuous batching: up to max_active sequences a step, joining as
    others leave. Returns the steps run and the rows they held."""
    waiting, active, steps, rows = list(seqs), [], 0, 0
    while waiting or active:
        while waiting and len(active) < max_active:
            s = waiting.pop(0)
            s.kcache = ops.cache((m.layers, seq_len, m.kv))
            s.vcache = ops.cache((m.layers, seq_len, m.kv))
            active.append(s)
        logits = step(m, ops, active)
        steps, rows = steps + 1, rows + len(active)
        for r, s in enumerate(active):
            if s.pos >= len(s.prompt) - 1:
                s.out.append(int(np.argmax(logits[r])))
            s.pos += 1
        active = [s for s in active if len(s.out) < s.gen]
    return steps, rows


def requests(n, prompt, gen, vocab, seed):
    rng = np.random.default_rng(seed + 1)
    return [(i, [int(t) for t in rng.integers(0, vocab, rng.integers(prompt[0], prompt[1] + 1))],
             int(rng.integers(gen[0], gen[1] + 1))) for i in range(n)]


def span(text):
    lo, _, hi = text.partition("-")
    lo, hi = int(lo), int(hi or lo)
    if not 1 <= lo <= hi:
        raise argparse.ArgumentTypeError("'%s' is not MIN-MAX with 1 <= MIN <= MAX" % text)
    return lo, hi


def main(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    for name, default in (("dim", 288), ("hidden", 768), ("layers", 6), ("heads", 6),
                          ("kv-heads", 6), ("vocab", 32000), ("sequences", 16), ("clients", 8),
                          ("seed", 1)):
        p.add_argument("--" + name, type=int, default=default)
    p.add_argument("--prompt", type=span, default=(16, 64))
    p.add_argument("--gen", type=span, default=(16, 64))
    p.add_argument("--weights", choices=("f32", "bf16", "q8"), default="f32")
    p.add_argument("--short", action="store_true", help="a tiny model and a few sequences")
    p.add_argument("--json", action="store_true")
    a = p.parse_args(argv)
    if a.short:
        a.dim, a.hidden, a.layers, a.heads, a.kv_heads, a.vocab = 64, 176, 2, 4, 2, 512
        a.sequences, a.clients, a.prompt, a.gen = 6, 3, (3, 12), (2, 8)
    m = Model(a.dim, a.hidden, a.layers, a.heads, a.kv_heads, a.vocab, a.seed)
    reqs = requests(a.sequences, a.prompt, a.gen, a.vocab, a.seed)
    seq_len = a.prompt[1] + a.gen[1]

    with nxr.Runtime() as rt:
        doms = rt.domains
        packed = {name: [rt.pack(L[name], format=a.weights) for L in m.layer]
                  for name in ("qkv", "o", "w13", "w2")}
        packed["cls"] = rt.pack(m.cls, format=a.weights)

        def run_nxr(max_active):
            """Sequences dealt round robin to the domains, a serving thread each."""
            shares = [[Seq(*r) for r in reqs[d::len(doms)]] for d in range(len(doms))]
            figures, errors = [None] * len(doms), []

            def worker(d):
                try:
                    ctx = rt.context(doms[d].id)
                    with ctx, ctx.bind():
                        figures[d] = serve(m, NxrOps(m, ctx, packed), shares[d], max_active,
                                           seq_len)
                except Exception as e:  # reported after the join
                    errors.append(e)

            t0 = time.perf_counter()
            threads = [threading.Thread(target=worker, args=(d,)) for d in range(len(doms))]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            wall = time.perf_counter() - t0
            if errors:
                raise errors[0]
            seqs = sorted((s for share in shares for s in share), key=lambda s: s.index)
            steps = sum(f[0] for f in figures)
            return seqs, wall, sum(f[1] for f in figures) / max(steps, 1)

        batched, t_batched, batch_mean = run_nxr(a.clients)
        alone, t_alone, _ = run_nxr(1)
        plain = [Seq(*r) for r in reqs]
        t0 = time.perf_counter()
        serve(m, NumpyOps(m), plain, 1, seq_len)
        t_numpy = time.perf_counter() - t0
        for w in packed["cls"], *[w for ws in (packed[k] for k in ("qkv", "o", "w13", "w2"))
                                  for w in ws]:
            w.close()

    tokens = sum(len(s.out) for s in batched)
    same = all(s.out == t.out for s, t in zip(batched, alone))
    numpy_same = sum(s.out == t.out for s, t in zip(batched, plain))
    r = {"model": "llama", "weights": a.weights, "domains": len(doms), "sequences": a.sequences,
         "clients": a.clients, "tokens": tokens, "batch_mean": round(batch_mean, 3),
         "tokens_per_s": tokens / t_batched, "unbatched": {"tokens_per_s": tokens / t_alone},
         "numpy": {"tokens_per_s": tokens / t_numpy},
         "nxr_over_unbatched": t_alone / t_batched, "nxr_over_numpy": t_numpy / t_batched,
         "tokens_match": same, "numpy_sequences_same": numpy_same}
    if a.json:
        print(json.dumps(r))
    else:
        print("python_llm: llama dim %d, %d layers, vocab %d, %s weights; %d sequences over %d "
              "domain(s), %d in flight" % (a.dim, a.layers, a.vocab, a.weights, a.sequences,
                                           len(doms), a.clients))
        for name, tps in (("nxr, batched (a thread per domain)", r["tokens_per_s"]),
                          ("nxr, one sequence a step", r["unbatched"]["tokens_per_s"]),
                          ("numpy, one sequence at a time", r["numpy"]["tokens_per_s"])):
            print("  %-38s %9.1f tokens/s" % (name, tps))
        print("  batch %.2f; nxr / unbatched %.2fx, nxr / numpy %.2fx; tokens: %s on nxr's "
              "paths, numpy made the same for %d of %d sequences"
              % (batch_mean, r["nxr_over_unbatched"], r["nxr_over_numpy"],
                 "identical" if same else "DIFFER", numpy_same, a.sequences))
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
