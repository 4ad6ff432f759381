"""Domain memory as numpy arrays: no copy, on the domain's node, released
when the last array over it goes (the pools' outstanding count), and
replicas one per domain."""
import unittest

import numpy as np

import nxr
import support


class Empty(unittest.TestCase):
    def test_an_array_over_a_pool_buffer_released_when_collected(self):
        with support.runtime() as rt:
            ctx = rt.context(rt.domains[0].id)
            base = support.outstanding(rt)
            a = ctx.empty((3, 5))
            self.assertEqual((a.shape, a.dtype, a.flags.c_contiguous, a.flags.writeable),
                             ((3, 5), np.float32, True, True))
            self.assertEqual(support.outstanding(rt), base + 1)
            b = ctx.empty(7, dtype=np.int64)
            self.assertEqual((b.shape, b.dtype), ((7,), np.int64))
            self.assertEqual(support.outstanding(rt), base + 2)
            view = a[1:]
            del a  # the view keeps the buffer
            self.assertEqual(support.outstanding(rt), base + 2)
            view[...] = 4.0
            self.assertEqual(float(view.sum()), 40.0)
            del view, b
            self.assertEqual(support.outstanding(rt), base)

    def test_no_copy_the_array_is_the_domain_memory(self):
        with support.runtime() as rt:
            d = rt.domains[0]
            ctx = rt.context(d.id)
            a = ctx.empty(4096)  # 16 KiB: four pages
            a[...] = np.arange(4096, dtype=np.float32)
            # A kernel writing into it is seen through the array: the same
            # memory, not a copy of it.
            ctx.scale(a, 2.0, out=a)
            self.assertTrue(np.array_equal(a, 2 * np.arange(4096, dtype=np.float32)))
            where = nxr.nodes(a)
            if d.node >= 0 and rt.info()["domains"][0]["pool"]["binding"] == "bound":
                self.assertEqual(where, {d.node: 4}, where)

    def test_an_array_outlives_its_runtime_block(self):
        idle = support.threads()
        with support.runtime() as rt:
            a = rt.context(rt.domains[0].id).empty(1000)
        a[...] = 3.0  # still valid memory: the runtime waits for it
        self.assertEqual(float(a.sum()), 3000.0)
        self.assertGreater(support.threads(), idle)
        del a
        self.assertEqual(support.threads(), idle)

    def test_runtime_empty_names_the_domain(self):
        with support.runtime() as rt:
            d = rt.domains[-1]
            base = support.outstanding(rt)
            a = rt.empty(d.id, (2, 3), dtype=np.float64)
            self.assertEqual((a.shape, a.dtype), ((2, 3), np.float64))
            self.assertEqual(support.outstanding(rt), base + 1)
            with self.assertRaises(nxr.Error) as e:
                rt.empty(max(x.id for x in rt.domains) + 1, 4)
            self.assertEqual(e.exception.status, nxr.NXR_ENODOMAIN)
            del a
            self.assertEqual(support.outstanding(rt), base)

    def test_bad_shapes(self):
        with support.runtime() as rt:
            ctx = rt.context(rt.domains[0].id)
            base = support.outstanding(rt)
            for shape in ((-1, 3), "x", (2.5, 1j)):
                with self.assertRaises(nxr.Error) as e:
                    ctx.empty(shape)
                self.assertEqual(e.exception.status, nxr.EINVAL)
            self.assertEqual(support.outstanding(rt), base)


class Replicate(unittest.TestCase):
    def test_one_copy_per_domain_on_its_node(self):
        cpus = support.cpus()
        spec = ";".join("%d:%d" % (i, c) for i, c in enumerate(cpus[:2]))
        with nxr.Runtime(domains=spec, ignore_env=True) as rt:
            src = np.arange(3000, dtype=np.float32).reshape(30, 100)
            base = support.outstanding(rt)
            copies = rt.replicate(src)
            self.assertEqual(len(copies), len(rt.domains))
            self.assertEqual(support.outstanding(rt), base + len(rt.domains))
            for d, c in zip(rt.domains, copies):
                self.assertTrue(np.array_equal(c, src))
                self.assertNotEqual(c.ctypes.data, src.ctypes.data)
                if d.node >= 0:
                    self.assertEqual(set(nxr.nodes(c)), {d.node})
            del copies, c
            self.assertEqual(support.outstanding(rt), base)

    def test_pages_on_node_counts_a_copys_pages(self):
        with support.runtime() as rt:
            d = rt.domains[0]
            if d.node < 0:
                self.skipTest("domain 0 has no node here")
            c = rt.replicate(np.arange(5000, dtype=np.float32))[0]
            start, end = c.ctypes.data, c.ctypes.data + c.nbytes
            spanned = (end - 1) // 4096 - start // 4096 + 1
            self.assertEqual(nxr.pages_on_node(c, d.node), (spanned, spanned))
            self.assertEqual(nxr.pages_on_node(c, d.node + 1), (spanned, 0))
            with self.assertRaises(nxr.Error) as e:
                nxr.pages_on_node(c, -1)
            self.assertEqual(e.exception.status, nxr.EINVAL)
            self.assertIn("node is negative", str(e.exception))
            del c

    def test_host_memory_lives_nowhere_nxr_knows(self):
        # nodes() reports what the kernel says, errors included: an
        # untouched page of the host's is not on any node yet.
        a = np.empty(1 << 20, dtype=np.uint8)
        self.assertTrue(all(isinstance(k, int) for k in nxr.nodes(a)))
        with support.runtime() as rt:
            with self.assertRaises(nxr.Error) as e:
                rt.replicate([1.0, 2.0])
            self.assertEqual(e.exception.status, nxr.EINVAL)


if __name__ == "__main__":
    unittest.main()
