"""Calls made from inside a body (a parallel_for range or a submitted task
running Python): they belong to the operation that runs the body, whichever
participant runs it (docs/contracts.md, "Who drives a context"). So a body
of a context's call may call that context's kernels, which run in place,
on the calling thread and on a worker alike; it may not close the context
(a use of the context while a call on it is in progress: EBUSY), nor close
a runtime or wait for a job (each would wait for the very operation that
runs it: NXR_EREENTRANT). A refused call changes nothing: the context, the
runtime and the job are there afterwards, to use, close and wait for."""
import threading
import unittest

import numpy as np

import nxr
import support

W = support.WATCHDOG_S


def setUpModule():
    support.start_watchdog()


def on_this_thread(ctx, body):
    """Runs body(begin, end) as the one range of a parallel_for that the
    calling thread runs itself: bound to the domain, a one-range loop is
    not handed to a worker (docs/contracts.md, "Where work runs")."""
    me, ran = threading.get_ident(), []

    def wrapped(b, e):
        ran.append(threading.get_ident())
        body(b, e)

    with ctx.bind():
        ctx.parallel_for(1, wrapped)
    assert ran == [me], "the range ran on %s, not on the calling thread %s" % (ran, me)


def refusal(call):
    """The nxr.Error call() raised (None if it returned), for a body to
    record: an exception raised inside a body would end the operation."""
    try:
        call()
    except nxr.Error as e:
        return e
    return None


class KernelsInABody(unittest.TestCase):
    def test_a_task_on_a_worker_calls_its_contexts_kernels_while_the_driver_is_in_a_call(self):
        # The task (on a worker) calls ctx.sum while the driver is inside
        # ctx.parallel_for: the task's call belongs to its job, an
        # operation of ctx, and runs in place; it is not a second driver.
        x = np.arange(64, dtype=np.float32)
        with support.runtime() as rt:
            ctx = rt.context(rt.domains[0].id)
            driving, answered = threading.Event(), threading.Event()
            got = []

            def task(i):
                try:
                    if driving.wait(W):
                        got.append(ctx.sum(x))
                    else:
                        got.append("the driver never entered its call")
                except BaseException as e:  # noqa: B902 -- the test reads it
                    got.append(e)
                finally:
                    answered.set()

            job = ctx.submit(1, task)
            on_this_thread(ctx, lambda b, e: (driving.set(), answered.wait(W)))
            job.wait()
            self.assertEqual(got, [float(x.sum())])

    def test_every_range_calls_its_contexts_kernels_whichever_thread_runs_it(self):
        x = np.arange(256, dtype=np.float32)
        with support.runtime() as rt:
            ctx = rt.context(rt.domains[0].id)
            got = []
            ctx.parallel_for(len(x), lambda b, e: got.append((b, e, ctx.sum(x[b:e]))), grain=8)
            self.assertEqual(sorted(i for b, e, _ in got for i in range(b, e)), list(range(len(x))))
            for b, e, s in got:
                self.assertEqual(s, float(x[b:e].sum()))


class CloseInABody(unittest.TestCase):
    def test_closing_the_context_whose_call_runs_the_body_is_refused(self):
        x = np.arange(8, dtype=np.float32)
        with support.runtime() as rt:
            ctx = rt.context(rt.domains[0].id)
            refused = []
            on_this_thread(ctx, lambda b, e: refused.append(refusal(ctx.close)))
            self.assertEqual([type(e) for e in refused], [nxr.Error], refused)
            self.assertEqual(refused[0].status, nxr.EBUSY, str(refused[0]))
            self.assertIn("inside a body", str(refused[0]))
            self.assertEqual(ctx.sum(x), 28.0)  # still open
            ctx.close()
            self.assertEqual(sum(d["contexts"] for d in rt.info()["domains"]), 0)

    def test_closing_the_runtime_inside_a_body_is_refused_and_it_closes_later(self):
        idle = support.threads()
        rt = support.runtime()
        ctx = rt.context(rt.domains[0].id)
        refused = []
        on_this_thread(ctx, lambda b, e: refused.append(refusal(rt.close)))
        self.assertEqual([type(e) for e in refused], [nxr.Error], refused)
        self.assertEqual(refused[0].status, nxr.NXR_EREENTRANT, str(refused[0]))
        self.assertFalse(rt.closed)
        self.assertEqual(ctx.sum(np.ones(4, np.float32)), 4.0)  # its contexts too
        rt.close()
        support.collect()
        self.assertEqual(support.threads(), idle)

    def test_the_last_array_of_a_closed_runtime_dropped_inside_a_body(self):
        # The runtime goes with its last array; dropped inside a body of
        # another runtime, its destroy waits until the call that ran the
        # body returned (nxr_runtime_destroy inside a body is refused).
        with support.runtime() as other:
            ctx = other.context(other.domains[0].id)
            idle = support.threads()
            rt = support.runtime()
            held = [rt.empty(rt.domains[0].id, 16)]
            rt.close()
            self.assertGreater(support.threads(), idle)  # kept for its array
            ctx.parallel_for(1, lambda b, e: held.clear())
            support.collect()
            self.assertEqual(support.threads(), idle)


class JobsAndBodies(unittest.TestCase):
    def test_a_wait_refused_inside_a_body_leaves_the_job_to_wait_for(self):
        with support.runtime() as rt:
            ctx = rt.context(rt.domains[0].id)

            def task(i):
                raise KeyError(i)

            job = ctx.submit(1, task)
            refused = []
            on_this_thread(ctx, lambda b, e: refused.append(refusal(job.wait)))
            self.assertEqual([type(e) for e in refused], [nxr.Error], refused)
            self.assertEqual(refused[0].status, nxr.NXR_EREENTRANT, str(refused[0]))
            with self.assertRaises(KeyError):
                job.wait()  # the task's exception, not "already waited for"
            with self.assertRaises(nxr.Error) as e:
                job.wait()
            self.assertIn("already waited for", str(e.exception))

    def test_a_task_closing_its_own_context_is_refused_and_its_job_reports(self):
        x = np.arange(8, dtype=np.float32)
        with support.runtime() as rt:
            ctx = rt.context(rt.domains[0].id)
            refused = []

            def task(i):
                refused.append(refusal(ctx.close))
                raise KeyError(i)

            job = ctx.submit(1, task)
            with self.assertRaises(KeyError):
                job.wait()
            self.assertEqual([type(e) for e in refused], [nxr.Error], refused)
            self.assertEqual(refused[0].status, nxr.EBUSY, str(refused[0]))
            self.assertEqual(ctx.sum(x), 28.0)

    def test_closing_a_context_with_jobs_inside_another_contexts_body_is_refused(self):
        with support.runtime() as rt:
            a, b = rt.context(rt.domains[0].id), rt.context(rt.domains[0].id)
            release = threading.Event()
            job = b.submit(1, lambda i: release.wait(W))
            refused = []
            on_this_thread(a, lambda *_: refused.append(refusal(b.close)))
            release.set()
            self.assertEqual([type(e) for e in refused], [nxr.Error], refused)
            self.assertEqual(refused[0].status, nxr.NXR_EREENTRANT, str(refused[0]))
            job.wait()
            b.close()

    def test_close_waits_for_the_job_and_wait_still_reports_it(self):
        with support.runtime() as rt:
            ctx = rt.context(rt.domains[0].id)

            def task(i):
                raise KeyError(i)

            job = ctx.submit(1, task)
            ctx.close()  # waits for the job; its outcome is kept for wait()
            with self.assertRaises(KeyError):
                job.wait()


if __name__ == "__main__":
    unittest.main()
