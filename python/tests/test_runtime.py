"""Runtime, contexts and bind: each call's happy path against what the
process itself says (its affinity, /proc), and the bad input of each."""
import os
import unittest

import nxr
import support


class RuntimeCalls(unittest.TestCase):
    def test_domains_and_info_describe_this_runtime(self):
        allowed = support.cpus()
        with support.runtime() as rt:
            info = rt.info()
            self.assertEqual(info["topology"]["allowed"], allowed)
            doms = rt.domains
            self.assertEqual([d.id for d in doms], [d["id"] for d in info["domains"]])
            # One domain per NUMA node, together covering the allowed CPUs.
            self.assertEqual(sorted(c for d in doms for c in d.cpus), allowed)
            self.assertEqual(len(doms), info["topology"]["nodes"])

    def test_declared_domains_and_a_synthetic_topology(self):
        c = support.cpus()[0]
        topo = "synthetic:pack:2 numa:1(indexes=0,2) pu:1"
        with nxr.Runtime(domains="7:%d" % c, ignore_env=True) as rt:
            self.assertEqual([(d.id, d.cpus) for d in rt.domains], [(7, (c,))])
        with nxr.Runtime(topology=topo, ignore_env=True) as rt:
            self.assertEqual(rt.info()["topology"]["source"], "synthetic")

    def test_a_context_per_domain_and_context_here(self):
        with support.runtime() as rt:
            for d in rt.domains:
                ctx = rt.context(d.id)
                self.assertEqual((ctx.domain_id, ctx.node), (d.id, d.node))
            self.assertEqual(sum(d["contexts"] for d in rt.info()["domains"]), len(rt.domains))
            d = rt.domains[0]
            before = os.sched_getaffinity(0)
            with rt.context(d.id).bind():
                here = rt.context_here()
            self.assertEqual(here.domain_id, d.id)
            self.assertEqual(os.sched_getaffinity(0), before)

    def test_bind_confines_the_thread_and_restores_it(self):
        with support.runtime() as rt:
            before = os.sched_getaffinity(0)
            for d in rt.domains:
                ctx = rt.context(d.id)
                with ctx.bind():
                    self.assertEqual(os.sched_getaffinity(0), set(d.cpus))
                self.assertEqual(os.sched_getaffinity(0), before)

    def test_close_destroys_the_runtime_and_leaves_no_thread(self):
        idle = support.threads()
        rt = support.runtime()
        ctx = rt.context(rt.domains[0].id)
        self.assertGreater(support.threads(), idle)
        rt.close()
        self.assertEqual(support.threads(), idle)
        self.assertTrue(rt.closed)
        rt.close()  # a second close is a no-op
        for call in (rt.info, lambda: rt.context(0), rt.context_here,
                     lambda: ctx.parallel_for(1, lambda b, e: None)):
            with self.assertRaises(nxr.Error) as e:
                call()
            self.assertEqual(e.exception.status, nxr.EINVAL)
            self.assertIn("closed", str(e.exception))


    def test_parallel_for_covers_the_range_once_and_submit_runs_every_task(self):
        with support.runtime() as rt:
            ctx = rt.context(rt.domains[0].id)
            for n, grain in ((1000, 0), (1000, 7), (1, 0)):
                seen = []
                ctx.parallel_for(n, lambda b, e: seen.append((b, e)), grain=grain)
                covered = sorted(i for b, e in seen for i in range(b, e))
                self.assertEqual(covered, list(range(n)))
                if grain:  # whole chunks of grain to each participant
                    self.assertTrue(all(b % grain == 0 for b, e in seen), seen)
            done = []
            ctx.submit(17, done.append).wait()
            self.assertEqual(sorted(done), list(range(17)))
            job = ctx.submit(1, lambda i: None)
            job.wait()
            with self.assertRaises(nxr.Error) as e:
                job.wait()  # a job is waited for once
            self.assertEqual(e.exception.status, nxr.EINVAL)

    def test_stats_count_the_tasks_run_and_the_kernel_calls(self):
        with support.runtime() as rt:
            d = rt.domains[0]
            ctx = rt.context(d.id)
            before = rt.stats()
            self.assertEqual(before["version"], 1)
            self.assertEqual([s["id"] for s in before["domains"]], [x.id for x in rt.domains])
            ctx.submit(23, lambda i: None).wait()
            after = rt.stats()
            mine = [s for s in after["domains"] if s["id"] == d.id][0]
            was = [s for s in before["domains"] if s["id"] == d.id][0]
            self.assertEqual(mine["tasks"] - was["tasks"], 23)
            self.assertEqual(mine["workers"], d.workers)
            self.assertIn("gemm", mine["kernel_calls"])
            self.assertGreaterEqual(mine["parks"], mine["wakes"])
            rt.refresh_budget()  # the quota has not changed: nothing moves
            self.assertEqual(rt.stats()["budget_changes"], 0)
        with self.assertRaises(nxr.Error):
            rt.stats()  # closed

    def test_metrics_is_a_prometheus_page_of_the_same_counters(self):
        with support.runtime() as rt:
            page = rt.metrics()
            types = [l.split()[2] for l in page.splitlines() if l.startswith("# TYPE ")]
            self.assertEqual(len(types), len(set(types)))
            tasks = [l for l in page.splitlines() if l.startswith("nxr_domain_tasks_total{")]
            self.assertEqual(len(tasks), len(rt.domains))

    def test_close_of_a_context_is_idempotent(self):
        with support.runtime() as rt:
            ctx = rt.context(rt.domains[0].id)
            ctx.close()
            ctx.close()
            self.assertEqual(sum(d["contexts"] for d in rt.info()["domains"]), 0)
            with self.assertRaises(nxr.Error) as e:
                ctx.parallel_for(1, lambda b, e: None)
            self.assertIn("context is closed", str(e.exception))
        ctx.close()  # after the runtime's close too


class RuntimeBadInput(unittest.TestCase):
    def check_refused(self, status, words, **kw):
        idle = support.threads()
        with self.assertRaises(nxr.Error) as e:
            nxr.Runtime(ignore_env=True, **kw)
        self.assertEqual(e.exception.status, status, str(e.exception))
        for w in words:
            self.assertIn(w, e.exception.detail)
        self.assertEqual(support.threads(), idle)

    def test_malformed_domains(self):
        self.check_refused(nxr.NXR_ESYNTAX, [], domains="0:")

    def test_overlapping_domains(self):
        c = support.cpus()[0]
        self.check_refused(nxr.NXR_EOVERLAP, ["overlap"], domains="0:%d;1:%d" % (c, c))

    def test_a_cpu_outside_the_allowed_set(self):
        self.check_refused(nxr.NXR_EDISALLOWED, [], domains="0:%d" % (max(support.cpus()) + 4096))

    def test_bad_num_threads(self):
        self.check_refused(nxr.EINVAL, ["num_threads"], num_threads=0)

    def test_an_unknown_domain(self):
        with support.runtime() as rt:
            with self.assertRaises(nxr.Error) as e:
                rt.context(max(d.id for d in rt.domains) + 1)
            self.assertEqual(e.exception.status, nxr.NXR_ENODOMAIN)
            with self.assertRaises(nxr.Error) as e:
                rt.context("0")
            self.assertEqual(e.exception.status, nxr.EINVAL)
            self.assertEqual(sum(d["contexts"] for d in rt.info()["domains"]), 0)


class SizesAndIds(unittest.TestCase):
    """Every count, size and id is checked in Python before the library sees
    it: ctypes would wrap a negative or too large value silently (-1 as a
    size_t is 2**64 - 1 tasks; 2**32 as an int is domain 0)."""

    def refused(self, name, call):
        with self.assertRaises(nxr.Error) as e:
            call()
        self.assertEqual(e.exception.status, nxr.EINVAL, str(e.exception))
        self.assertIn(name, e.exception.detail)

    def test_counts_sizes_and_ids_out_of_range_are_refused_naming_them(self):
        import numpy as np

        idle = support.threads()
        rt = support.runtime()
        ctx = rt.context(rt.domains[0].id)
        ran = []

        def record(*args):
            ran.append(args)
            raise KeyError("ran")  # a batch that got through ends at once

        big = 2 ** 64 + 1
        for name, call in (("count", lambda: ctx.submit(-1, record)),
                           ("count", lambda: ctx.submit(big, record)),
                           ("count", lambda: ctx.submit(2.0, record)),
                           ("count", lambda: ctx.submit(True, record)),
                           ("n", lambda: ctx.parallel_for(-1, record)),
                           ("n", lambda: ctx.parallel_for(big, record)),
                           ("grain", lambda: ctx.parallel_for(4, record, grain=-1)),
                           ("domain", lambda: rt.context(2 ** 32)),
                           ("domain", lambda: rt.context(-2 ** 31 - 1)),
                           ("domain", lambda: rt.empty(2 ** 32, 4)),
                           ("domains", lambda: rt.pack(np.ones((4, 4), np.float32),
                                                       domains=[2 ** 32])),
                           ("shape", lambda: ctx.empty((2 ** 62, 8))),
                           ("shape", lambda: ctx.empty((big,))),
                           ("num_threads", lambda: nxr.Runtime(num_threads=2 ** 32,
                                                              ignore_env=True))):
            with self.subTest(name=name):
                self.refused(name, call)
        self.assertEqual(ran, [])
        self.assertEqual(sum(d["contexts"] for d in rt.info()["domains"]), 1)
        self.assertEqual(support.outstanding(rt), 0)
        rt.close()  # nothing was submitted: it returns at once
        self.assertEqual(support.threads(), idle)


class CollectorOrder(unittest.TestCase):
    def test_a_job_never_waited_for_the_runtime_still_goes_after_its_contexts(self):
        # A job keeps its context and runtime reachable from the runtime's
        # own bookkeeping: a cycle, which only the collector frees, in an
        # order of its choosing. The runtime must still go last.
        # The tasks touch nothing of the runtime: tasks that looked up the
        # deleted globals `ctx` and `rt` could hold the last references on a
        # worker, inside a body, where the teardown is deferred to the next
        # call outside one (here: exit), which made this test fail about once
        # in twelve runs (the next test covers tasks that hold them).
        code = (
            "import gc, os, nxr\n"
            "gc.disable()\n"
            "idle = len(os.listdir('/proc/self/task'))\n"
            "for _ in range(3):\n"
            "    rt = nxr.Runtime(ignore_env=True)\n"
            "    ctx = rt.context(rt.domains[0].id)\n"
            "    job = ctx.submit(2, lambda i: None)\n"
            "    del rt, ctx, job\n"
            "    gc.collect()\n"
            "print('threads back:', len(os.listdir('/proc/self/task')) == idle)\n"
        )
        rc, out = support.fresh(code)
        self.assertEqual(rc, 0, out)
        self.assertNotIn("still open", out)
        self.assertIn("threads back: True", out)

    def test_a_job_whose_tasks_hold_its_runtimes_objects_keeps_them_until_exit(self):
        # The tasks' function holds the context, an array and packed weights
        # of the runtime (closure cells), and the job is dropped without a
        # wait. A task not yet started may still use them, so the collector
        # must free none of it (a released buffer written, weights freed
        # under a call): kept until exit, then waited for, and the runtime
        # destroyed last, with nothing reported.
        code = (
            "import gc, os, numpy as np, nxr\n"
            "idle = len(os.listdir('/proc/self/task'))\n"
            "import sys\n"
            "def serve():\n"
            "    rt = nxr.Runtime(ignore_env=True)\n"
            "    ctx = rt.context(rt.domains[0].id)\n"
            "    x = rt.empty(ctx.domain_id, (2, 8))\n"
            "    x[...] = 1\n"
            "    w = rt.pack(np.ones((8, 4), np.float32))\n"
            "    ctx.submit(2, lambda i: print('task:', float(ctx.sgemm_packed(x, w)[0, 0]),\n"
            "                                  flush=True))\n"
            "for _ in range(3):\n"
            "    serve()\n"
            "    gc.collect()\n"
            "print('kept:', len(os.listdir('/proc/self/task')) > idle)\n"
        )
        rc, out = support.fresh(code)
        self.assertEqual(rc, 0, out)
        self.assertIn("kept: True", out)
        self.assertEqual(out.count("task: 8.0"), 6, out)  # every task ran, by exit at the latest
        for words in ("still open", "outstanding", "Traceback", "Exception ignored"):
            self.assertNotIn(words, out)


if __name__ == "__main__":
    unittest.main()
