"""The kernels on numpy arrays: every call against a reference computed in
numpy (float64, from the formula, never through the binding), and the bad
input each check refuses -- wrong dtype, a non-contiguous array, shapes
that do not agree, a closed runtime -- raising nxr.Error(EINVAL) and
leaving no thread and no buffer behind."""
import math
import unittest

import numpy as np

import nxr
import support

RNG = np.random.default_rng(7)
TOL = dict(rtol=2e-5, atol=2e-5)


def rand(*shape):
    return RNG.uniform(-1, 1, size=shape).astype(np.float32)


def silu(x):
    return x / (1 + np.exp(-x))


def gelu(x):
    return 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))


def f64(a):
    return np.asarray(a, dtype=np.float64)


class Kernels(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.rt = support.runtime()
        cls.ctx = cls.rt.context(cls.rt.domains[0].id)

    @classmethod
    def tearDownClass(cls):
        cls.rt.close()

    def close(self, got, want, tol=TOL):
        self.assertEqual(got.shape, np.shape(want))
        np.testing.assert_allclose(f64(got), want, **tol)

    def test_sgemm_shapes_and_flags(self):
        for m, k, n in ((1, 64, 300), (5, 37, 16), (16, 8, 1), (70, 90, 50)):
            a, b = rand(m, k), rand(k, n)
            self.close(self.ctx.sgemm(a, b), f64(a) @ f64(b))
            at, bt = np.ascontiguousarray(a.T), np.ascontiguousarray(b.T)
            self.close(self.ctx.sgemm(at, bt, trans_a=True, trans_b=True), f64(a) @ f64(b))
            c = rand(m, n)
            want = 0.5 * (f64(a) @ f64(b)) + 2.0 * f64(c)
            got = self.ctx.sgemm(a, b, out=c, alpha=0.5, beta=2.0)
            self.assertIs(got, c)
            self.close(c, want)

    def test_sgemm_gemv_and_epilogue(self):
        x, w, bias = rand(256), rand(256, 512), rand(512)
        self.close(self.ctx.sgemm(x, w), f64(x) @ f64(w))
        for act, fn in ((None, lambda v: v), ("silu", silu), ("gelu", gelu)):
            a = rand(3, 256)
            got = self.ctx.sgemm(a, w, bias=bias, activation=act)
            self.close(got, fn(f64(a) @ f64(w) + f64(bias)))

    def test_packed_weights_give_the_plain_bits(self):
        w, bias = rand(96, 200), rand(200)
        packed = self.rt.pack(w)
        packed_t = self.rt.pack(np.ascontiguousarray(w.T), trans=True)
        self.assertEqual((packed.k, packed.n), (96, 200))
        for m in (1, 4, 16, 33):
            a = rand(m, 96)
            plain = self.ctx.sgemm(a, w, bias=bias, activation="silu")
            got = self.ctx.sgemm_packed(a, packed, bias=bias, activation="silu")
            self.close(got, silu(f64(a) @ f64(w) + f64(bias)))
            self.assertTrue(np.array_equal(got, plain))
            self.close(self.ctx.sgemm_packed(a, packed_t), f64(a) @ f64(w))
        self.close(self.ctx.sgemm_packed(a[0], packed), f64(a[0]) @ f64(w))  # a GEMV
        packed.close()
        self.assertTrue(packed.closed)
        with self.assertRaises(nxr.Error):
            self.ctx.sgemm_packed(a, packed)

    def test_packed_formats_within_their_bound(self):
        # runtime/nxr_weights.h's bound: |alpha| sum |a| e + 2 (k + 2) u sum |a w| (+ the
        # alpha/beta rounding), e = 2^-8 |w| (bf16) or (1 + 2^-12) max|w| / 254 per
        # block of 32 along k (q8), and for q8 the activations' term where A is quantized
        # too: sum (|w| + e) (1 + 2^-12) max|a| / 254 over a's block.
        k, n, u = 100, 70, 2.0**-24
        w = rand(k, n)
        wd = f64(w)
        bmax = np.concatenate(
            [np.repeat(np.abs(wd[b : b + 32]).max(axis=0, keepdims=True), min(32, k - b), axis=0)
             for b in range(0, k, 32)]
        )
        errs = {"bf16": 2.0**-8 * np.abs(wd), "q8": (1 + 2.0**-12) * bmax / 254}
        for fmt, e in errs.items():
            packed = self.rt.pack(w, format=fmt)
            packed_t = self.rt.pack(np.ascontiguousarray(w.T), trans=True, format=fmt)
            self.assertEqual(packed.format, fmt)
            self.assertIn(fmt, repr(packed))
            for m in (1, 3, 16, 17):
                a = rand(m, k)
                ref = f64(a) @ wd
                bound = np.abs(f64(a)) @ e + 2 * (k + 2) * u * (np.abs(f64(a)) @ np.abs(wd)) \
                    + 2 * u * np.abs(ref)
                if fmt == "q8":
                    amax = np.concatenate(
                        [np.repeat(np.abs(f64(a)[:, b : b + 32]).max(axis=1, keepdims=True),
                                   min(32, k - b), axis=1) for b in range(0, k, 32)], axis=1)
                    bound += (1 + 2.0**-12) * (amax / 254) @ (np.abs(wd) + e)
                for p in (packed, packed_t):
                    got = f64(self.ctx.sgemm_packed(a, p))
                    self.assertTrue(np.all(np.abs(got - ref) <= bound * (1 + 1e-6)),
                                    "%s m %d: off by %g, bound %g"
                                    % (fmt, m, np.max(np.abs(got - ref)), np.min(bound)))
            packed.close()
            packed_t.close()
        self.assertEqual(self.rt.pack(w).format, "f32")

    def test_packed_formats_hold_their_values(self):
        # 127 times a row of the identity reads one weight of each column back, times 127,
        # with one f32 rounding (127 quantizes to itself where q8 quantizes A too): bf16
        # rounds to nearest even, q8 is round(w / s) * s with s = max|w| / 127 over 32
        # along k, read as (127 q) * s.
        k, n = 40, 3
        w = rand(k, n)
        w[5] = [0.01, -0.3, 1.0 + 2.0**-8]  # 1 + 2^-8: a tie, to even (1.0)
        bits = w.view(np.uint32).astype(np.uint64)
        bf16 = ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16 << 16).astype(np.uint32).view(np.float32)
        bf16 = np.float32(127) * bf16
        q8 = np.empty_like(w)
        for b in range(0, k, 32):
            s = (np.abs(w[b : b + 32]).max(axis=0) / np.float32(127)).astype(np.float32)
            q = np.clip(np.rint(w[b : b + 32] / s), -127, 127).astype(np.float32)
            q8[b : b + 32] = (np.float32(127) * q) * s
        for fmt, want in (("bf16", bf16), ("q8", q8)):
            packed = self.rt.pack(w, format=fmt)
            for p in (0, 5, 33, 39):
                e = np.zeros(k, np.float32)
                e[p] = 127
                got = self.ctx.sgemm_packed(e, packed)
                self.assertTrue(np.array_equal(got, want[p]), "%s row %d: %r, want %r"
                                % (fmt, p, got, want[p]))
            packed.close()

    def test_norms_and_softmax(self):
        x, g, b = rand(7, 33), rand(33), rand(33)
        ms = np.mean(f64(x) ** 2, axis=1, keepdims=True)
        self.close(self.ctx.rmsnorm(x, g, eps=1e-5), f64(x) / np.sqrt(ms + 1e-5) * f64(g))
        mu = f64(x).mean(axis=1, keepdims=True)
        var = ((f64(x) - mu) ** 2).mean(axis=1, keepdims=True)
        self.close(self.ctx.layernorm(x, g, b, eps=1e-5),
                   (f64(x) - mu) / np.sqrt(var + 1e-5) * f64(g) + f64(b), dict(rtol=1e-4, atol=1e-4))
        e = np.exp(f64(x) - f64(x).max(axis=1, keepdims=True))
        self.close(self.ctx.softmax(x), e / e.sum(axis=1, keepdims=True))
        v = rand(50)
        ev = np.exp(f64(v) - f64(v).max())
        self.close(self.ctx.softmax(v), ev / ev.sum())

    def test_elementwise_and_reductions(self):
        x, y = rand(1000), rand(1000)
        self.close(self.ctx.add(x, y), f64(x) + f64(y))
        self.close(self.ctx.mul(x, y), f64(x) * f64(y))
        self.close(self.ctx.scale(x, -3.0), -3.0 * f64(x))
        self.close(self.ctx.silu(x), silu(f64(x)))
        self.close(self.ctx.gelu(x), gelu(f64(x)), dict(rtol=1e-4, atol=1e-5))
        self.close(self.ctx.triad(x, y, 0.25), f64(x) + 0.25 * f64(y))
        m, row = rand(9, 40), rand(40)
        self.close(self.ctx.add_rows(m, row), f64(m) + f64(row))
        self.close(self.ctx.mul_rows(m, row), f64(m) * f64(row))
        self.assertAlmostEqual(self.ctx.sum(x), float(f64(x).sum()), places=3)
        self.assertEqual(self.ctx.max(x), float(x.max()))
        self.assertEqual(self.ctx.argmax(x), int(np.argmax(x)))
        # In place: out is x.
        z = x.copy()
        self.assertIs(self.ctx.scale(z, 2.0, out=z), z)
        self.close(z, 2.0 * f64(x))


class BadInput(unittest.TestCase):
    """Each check refused with nxr.Error(EINVAL) naming the argument, and
    nothing left: no thread, no buffer, and the output untouched."""

    def setUp(self):
        self.rt = support.runtime()
        self.ctx = self.rt.context(self.rt.domains[0].id)
        self.threads = support.threads()
        self.buffers = support.outstanding(self.rt)

    def tearDown(self):
        support.collect()
        self.assertEqual(support.threads(), self.threads)
        self.assertEqual(support.outstanding(self.rt), self.buffers)
        self.rt.close()

    def refused(self, words, call, *args, **kw):
        with self.assertRaises(nxr.Error) as e:
            call(*args, **kw)
        self.assertEqual(e.exception.status, nxr.EINVAL, str(e.exception))
        for w in words:
            self.assertIn(w, str(e.exception))
        return e.exception

    def test_packed_format_refusals(self):
        w = rand(8, 4)
        self.refused(["format 'int4'", "'bf16'"], self.rt.pack, w, format="int4")
        self.refused(["format"], self.rt.pack, w, format=2)
        w[3, 1] = np.inf
        self.refused(["op(W)[3][1] is not finite"], self.rt.pack, w, format="q8")
        self.rt.pack(w, format="bf16").close()  # bf16 keeps infinities

    def test_wrong_dtype(self):
        a, b = rand(4, 8), rand(8, 3)
        self.refused(["a", "float64"], self.ctx.sgemm, a.astype(np.float64), b)
        self.refused(["b", "int32"], self.ctx.sgemm, a, b.astype(np.int32))
        self.refused(["gamma", "float16"], self.ctx.rmsnorm, a, rand(8).astype(np.float16))
        self.refused(["x", "float64"], self.ctx.softmax, a.astype(np.float64))
        self.refused(["y"], self.ctx.add, a, a.astype(np.float64))
        self.refused(["x", "list"], self.ctx.sum, [1.0, 2.0])
        self.refused(["out", "float64"], self.ctx.sgemm, a, b, out=np.zeros((4, 3)))

    def test_non_contiguous(self):
        a, b = rand(8, 8), rand(8, 8)
        self.refused(["a", "C-contiguous"], self.ctx.sgemm, a.T, b)
        self.refused(["b", "C-contiguous"], self.ctx.sgemm, a, np.asfortranarray(b))
        self.refused(["x", "C-contiguous"], self.ctx.scale, a[:, ::2], 2.0)
        out = np.zeros((8, 16), np.float32)[:, ::2]
        self.refused(["out", "C-contiguous"], self.ctx.softmax, a, out=out)

    def test_shape_mismatch(self):
        a = rand(4, 8)
        out = np.full((4, 5), 7.0, np.float32)
        self.refused(["b", "k = 8"], self.ctx.sgemm, a, rand(7, 5))
        self.refused(["out", "(4, 5)"], self.ctx.sgemm, a, rand(8, 6), out=out)
        self.assertTrue((out == 7.0).all())
        self.refused(["bias"], self.ctx.sgemm, a, rand(8, 5), bias=rand(4))
        self.refused(["activation"], self.ctx.sgemm, a, rand(8, 5), activation="relu")
        self.refused(["gamma"], self.ctx.rmsnorm, a, rand(7))
        self.refused(["y"], self.ctx.add, a, rand(4, 7))
        self.refused(["row"], self.ctx.add_rows, a, rand(4))
        self.refused(["x", "3-D"], self.ctx.softmax, rand(2, 2, 2))
        self.refused(["beta"], self.ctx.sgemm, a, rand(8, 5), beta=1.0)
        w = self.rt.pack(rand(8, 5))
        self.refused(["weights' k = 8"], self.ctx.sgemm_packed, rand(4, 6), w)
        self.refused(["weights", "ndarray"], self.ctx.sgemm_packed, a, rand(8, 5))
        w.close()

    def test_the_library_checks_aliasing(self):
        # Shapes agree, so the binding passes it on; the library refuses an
        # output that overlaps its inputs and says so (its detail).
        a = rand(8, 8)
        e = self.refused([], self.ctx.sgemm, a, a, out=a)
        self.assertIn("nxr_sgemm", e.detail)
        self.assertTrue(e.detail)

    def test_read_only_output(self):
        out = rand(10)
        out.flags.writeable = False
        self.refused(["out", "read-only"], self.ctx.scale, rand(10), 2.0, out=out)

    def test_a_closed_runtime(self):
        ctx, a = self.ctx, rand(4, 4)
        rt2 = support.runtime()
        c2 = rt2.context(rt2.domains[0].id)
        rt2.close()
        self.refused(["closed"], c2.sgemm, a, a)
        self.refused(["closed"], c2.softmax, a)
        self.refused(["closed"], c2.softmax, a, out=np.empty_like(a))  # no allocation first
        self.refused(["closed"], c2.sum, a)
        self.refused(["closed"], c2.empty, 4)
        self.refused(["closed"], rt2.pack, a)
        self.assertEqual(ctx.sgemm(a, a).shape, (4, 4))  # the other runtime is untouched


if __name__ == "__main__":
    unittest.main()
