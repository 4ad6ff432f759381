"""nxr.Context: one thread's handle on one domain (runtime/nxr_ctx.h).

The thread rule. A context is driven by one thread at a time. The binding
enforces it: each call takes the context's lock without waiting, and a
call from a second thread while another is inside one raises
nxr.Error(EBUSY) instead of entering the library (where it would corrupt
the context's state). Open one context per thread.

Bodies. A call on a context from a body of that context's operation (a
parallel_for range, a submitted task) belongs to that operation, whichever
participant runs the body, the calling thread or a worker: it runs in
place (nxr's nesting rule), without the lock. close() from such a body is
refused (EBUSY: the context is in use by the call running the body), and
what would wait for the operation running the body is refused with
NXR_EREENTRANT: Job.wait, Runtime.close, closing a context whose jobs are
not waited for (nxr._bodies). A refused call changes nothing.

Jobs. A submitted batch (_Batch: its nxr_job_t, the callback its tasks
call, their exceptions) is held from the submit until it is waited for by
this module (_held), not by the Job or the Context: a task not yet started
may call the callback, and reach whatever its function reaches, at any
time until then, so none of that may be collected before (its finalizers
would run under the task: a released buffer written, a context
destroyed). Its runtime lists it too (nxr._runtime, "Order"). A context is
destroyed only after its batches were waited for. Job.wait waits once and
reports once; a close that waited for a job keeps its outcome for wait().
A job dropped without a wait is waited for by its context's or runtime's
close, or at exit; until then it keeps what its tasks' function reaches.

Concurrency. The library is loaded with ctypes.CDLL, which releases the
GIL for every foreign call: threads driving different contexts run their
kernels at the same time, and nxr's workers may call back into Python
(parallel_for, submit) while the driver waits inside nxr.

Arrays. Every kernel takes numpy arrays of dtype float32 in C order
(C-contiguous: a transposed view or a slice with a step is refused, use
numpy.ascontiguousarray) whose shapes agree; a violation raises
nxr.Error(EINVAL) naming the argument before the library sees it, and the
library's own checks (an output overlapping an input, ...) raise with its
detail. An output left as None is allocated in the context's domain
memory (empty()).
"""
import atexit
import contextlib
import ctypes
import threading
import weakref

from nxr import _args, _bodies, _lib, _memory
from nxr._errors import ERRNOS, NXR_CODES, Error, check, invalid

_ACTIVATIONS = {
    None: _lib.ACTIVATION_NONE,
    "silu": _lib.ACTIVATION_SILU,
    "gelu": _lib.ACTIVATION_GELU_TANH,
}


def f32(call, name, a, ndim=None, shape=None, writable=False):
    """a's data pointer, once a is a float32, C-contiguous numpy array of
    that rank and shape (None: any); else nxr.Error(EINVAL)."""
    np = _memory.numpy
    if not isinstance(a, np.ndarray):
        raise invalid(call, "%s: expected a numpy.ndarray, got %s" % (name, type(a).__name__))
    if a.dtype != np.float32:
        raise invalid(call, "%s: dtype %s, expected float32" % (name, a.dtype))
    if not a.flags.c_contiguous:
        raise invalid(
            call,
            "%s: not C-contiguous (shape %s, strides %s); pass numpy.ascontiguousarray(%s)"
            % (name, a.shape, a.strides, name),
        )
    if ndim is not None and a.ndim not in ((ndim,) if isinstance(ndim, int) else ndim):
        raise invalid(call, "%s: %d-D, expected %s-D" % (name, a.ndim, ndim))
    if shape is not None and a.shape != tuple(shape):
        raise invalid(call, "%s: shape %s, expected %s" % (name, a.shape, tuple(shape)))
    if writable and not a.flags.writeable:
        raise invalid(call, "%s: read-only" % name)
    return a.ctypes.data


def _reentrant(call, detail):
    return Error(NXR_CODES["NXR_EREENTRANT"], "%s: %s" % (call, detail), call)


# Every batch submitted and not yet waited for (see "Jobs"): a root.
_held = set()


def _wait_held_at_exit():
    # Before the finalizers' exit hook: those free buffers, weights and
    # contexts that a task still queued may use.
    for b in list(_held):
        try:
            b.finish(set())
        except Exception:  # noqa: BLE001 -- exiting: the others still go
            pass


# weakref.finalize registers its exit hook with the first finalizer made;
# one made now puts it before ours, and atexit runs ours first.
weakref.finalize(_wait_held_at_exit, lambda: None)
atexit.register(_wait_held_at_exit)


class _Batch:
    """One nxr_submit: its nxr_job_t (None once waited for), the callback its
    tasks call (kept until then), their exceptions, the token of the context
    that submitted it, and nxr_job_wait's status and detail once waited."""

    def __init__(self, ptr, callback, errors, owner):
        self.ptr, self.callback, self.errors, self.owner = ptr, callback, errors, owner
        self.lock = threading.Lock()  # one nxr_job_wait; its outcome
        self.rc, self.detail = 0, ""
        self.reported = False  # Job.wait gave the outcome

    def finish(self, batches):
        """Waits for the batch unless done (outside every body); keeps the
        outcome and drops it from batches (its runtime's)."""
        callback = None
        with self.lock:
            if self.ptr is not None:
                rc = _lib.lib.nxr_job_wait(self.ptr)
                detail = _lib.last_error() if rc else ""
                if rc == NXR_CODES["NXR_EREENTRANT"]:
                    # Refused, the job left as it was (a body this binding
                    # did not run): wait later.
                    raise Error(rc, detail, "nxr_job_wait")
                callback, self.callback = self.callback, None
                self.ptr, self.rc, self.detail = None, rc, detail
        batches.discard(self)
        _held.discard(self)
        # Dropped last, outside the lock: the tasks' function may hold the
        # last reference to a runtime, whose teardown finishes its batches
        # (this one among them) right here.
        del callback


class Job:
    """A batch submitted with Context.submit; wait() for it exactly once."""

    def __init__(self, ctx, batch):
        # ctx: held, so that its runtime (and the batch's nxr_job_t) stays.
        self._ctx, self._batch = ctx, batch

    def wait(self):
        """Blocks (GIL released) until every task ran; re-raises the first
        task's exception, or raises nxr.Error for nxr's failure. Inside a
        body: nxr.Error(NXR_EREENTRANT), the job left to wait for later."""
        b = self._batch
        if _bodies.inside():
            raise _reentrant("Job.wait", "called inside a body, where it could wait for the very "
                             "worker it runs on; the job is left as it was: wait outside every body")
        with b.lock:
            if b.reported:
                raise invalid("Job.wait", "this job was already waited for")
        b.finish(self._ctx._batches)  # a no-op when close() waited for it already
        with b.lock:
            if b.reported:  # another thread's wait() reported it meanwhile
                raise invalid("Job.wait", "this job was already waited for")
            b.reported = True
        _bodies.run_later()
        if b.errors:
            raise b.errors[0]
        if b.rc != 0:
            raise Error(b.rc, b.detail, "nxr_job_wait")


def close_context(ptr, open_contexts, batches_ref=None, token=None):
    """nxr_ctx_destroy(ptr) once, by whichever comes first: Context.close, the
    collector (the context's finalizer) or its runtime's teardown. The
    finalizer's call leaves a context whose batches still run to its
    runtime's teardown (their tasks may call it), which waits for them
    first; so does it when the batches are garbage too (batches_ref, weak:
    a finalizer's arguments must not reach the tasks' function, or nothing
    it reaches would ever be collected)."""
    if batches_ref is not None:
        batches = batches_ref()
        if batches is None or any(b.owner is token and b.ptr is not None for b in list(batches)):
            return
    try:
        open_contexts.remove(ptr)
    except KeyError:
        return  # destroyed already
    _lib.lib.nxr_ctx_destroy(ptr)


class Context:
    """A context on one domain; made by Runtime.context / context_here."""

    def __init__(self, runtime, work, ptr):
        self._runtime = runtime
        self._ptr = ptr
        # Held by the driver inside a call; never by a body's call.
        self._lock = threading.Lock()
        # Names this context in the batches it submits and the bodies its
        # operations run (nxr._bodies); holds nothing.
        self._token = object()
        # The runtime's sets (nxr._runtime._Work; not the _Work itself: a
        # Context must not keep a closed runtime from going).
        self._batches = work.batches
        d = _lib.lib.nxr_ctx_domain(ptr)
        self._domain = d
        self.domain_id = _lib.lib.nxr_domain_id(d)
        self.node = _lib.lib.nxr_domain_node(d)
        # A context dropped without close() is destroyed when collected;
        # its runtime's teardown destroys it first if the collector takes
        # the runtime first (a cycle through a job's callback).
        work.contexts.add(ptr.value)
        self._finalizer = weakref.finalize(self, close_context, ptr.value, work.contexts,
                                           weakref.ref(work.batches), self._token)

    def __repr__(self):
        return "<nxr.Context domain %d%s>" % (self.domain_id, " closed" if self._ptr is None else "")

    # ---- lifetime ------------------------------------------------------
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    def close(self):
        """Waits for its submitted jobs (their outcome kept for Job.wait) and
        destroys the context; a no-op once closed (also by its runtime's
        close). nxr.Error(EBUSY) while another thread is inside a call on
        it, or from a body of one of its own operations; NXR_EREENTRANT
        from any other body while a job of it is not waited for. A refused
        close changes nothing."""
        if _bodies.inside_of(self._token):
            raise Error(
                ERRNOS["EBUSY"],
                "close: called inside a body of an operation of the context of domain %d, "
                "which is using it; close it once that call returned (it is left open)"
                % self.domain_id,
                "close",
            )
        if not self._lock.acquire(blocking=False):
            raise self._busy("close")
        try:
            self._destroy()
        finally:
            self._lock.release()
        _bodies.run_later()

    def _destroy(self):  # under self._lock, outside the bodies of its own operations
        mine = [b for b in list(self._batches) if b.owner is self._token]
        if mine and _bodies.inside():
            raise _reentrant("close", "called inside a body with %d job(s) of the context of "
                             "domain %d not waited for; waiting there could wait for the very "
                             "worker it runs on (the context is left open)"
                             % (len(mine), self.domain_id))
        for b in mine:
            b.finish(self._batches)
        if self._ptr is not None:
            self._finalizer()  # nxr_ctx_destroy, once
            self._ptr = None

    def _busy(self, call):
        return Error(
            ERRNOS["EBUSY"],
            "%s: another thread is inside a call on the context of domain %d; a context "
            "is driven by one thread at a time (open one per thread)" % (call, self.domain_id),
            call,
        )

    @contextlib.contextmanager
    def _driving(self, call):
        if _bodies.inside_of(self._token):
            # From a body of this context's operation: part of that
            # operation, in place, whichever participant runs the body (the
            # driver holds the lock; the context stays open until the
            # operation ended: close waits for its jobs, refuses in a call).
            yield self._ptr
            return
        # Never waits: a second driver is refused, not queued (the thread rule).
        if not self._lock.acquire(blocking=False):
            raise self._busy(call)
        try:
            if self._ptr is None:
                what = "runtime" if self._runtime.closed else "context"
                raise Error(ERRNOS["EINVAL"], "%s: the %s is closed" % (call, what), call)
            yield self._ptr
        finally:
            self._lock.release()
            _bodies.run_later()

    def _call(self, call, fn, *args):
        with self._driving(call) as ptr:
            check(fn(ptr, *args), call)

    # ---- the calling thread --------------------------------------------
    @contextlib.contextmanager
    def bind(self):
        """with ctx.bind(): confines the calling thread to the domain's CPUs
        (read back and verified) for the block, then restores its previous
        affinity. Inside, small work on the domain runs on this thread."""
        was = ctypes.c_void_p()
        self._call("nxr_ctx_bind", _lib.lib.nxr_ctx_bind, ctypes.byref(was))
        try:
            yield self
        finally:
            check(_lib.lib.nxr_thread_binding_restore(was), "nxr_thread_binding_restore")

    # ---- memory ----------------------------------------------------------
    def empty(self, shape, dtype=None):
        """An uninitialised numpy array (default float32) in this domain's node
        memory, no copy: a pool buffer released when the array (and every
        view of it) is collected."""
        with self._driving("empty"):
            return _memory.empty(self._runtime._ptr("empty"), self._domain, "empty", shape, dtype)

    def _out(self, call, out, shape):
        """The output array: out once checked, or new domain memory."""
        if out is None:
            return self.empty(shape)
        f32(call, "out", out, shape=shape, writable=True)
        return out

    # ---- work --------------------------------------------------------------
    def parallel_for(self, n, fn, grain=0):
        """Calls fn(begin, end) over [0, n) on the domain's threads, each range
        whole chunks of `grain` (0: one range per participant, split evenly).
        fn runs under the GIL; the first exception it raises is raised here
        after every range ran. n and grain: ints in [0, sys.maxsize]."""
        n = _args.count("parallel_for", "n", n)
        grain = _args.count("parallel_for", "grain", grain)
        errors, token = [], self._token

        def body(_arg, begin, end, _worker):
            with _bodies.running(token):
                try:
                    fn(begin, end)
                except BaseException as e:  # noqa: B902 -- carried to the caller
                    errors.append(e)

        cb = _lib.FOR_FN(body)
        self._call("nxr_parallel_for", _lib.lib.nxr_parallel_for, 0, n, grain, cb, None)
        if errors:
            raise errors[0]

    def submit(self, count, fn):
        """Runs fn(index) for index in [0, count) asynchronously on the domain's
        workers; returns a Job to wait() for. A task that raises stops the
        tasks not yet started; wait() re-raises its exception. count: an int
        in [0, sys.maxsize]."""
        count = _args.count("submit", "count", count)
        errors, token = [], self._token

        def task(_arg, index):
            with _bodies.running(token):
                try:
                    fn(index)
                    return 0
                except BaseException as e:  # noqa: B902 -- carried to wait()
                    errors.append(e)
                    return ERRNOS["EAGAIN"]

        cb = _lib.TASK_FN(task)
        out = ctypes.c_void_p()
        self._call("nxr_submit", _lib.lib.nxr_submit, count, cb, None, ctypes.byref(out))
        # Held until waited for (by Job.wait, this context's close, the
        # runtime's close or teardown, or at exit): the callback, and what
        # it reaches, must outlive the tasks ("Jobs").
        batch = _Batch(out, cb, errors, token)
        _held.add(batch)
        self._batches.add(batch)
        return Job(self, batch)

    # ---- kernels -------------------------------------------------------------
    def sgemm(self, a, b, out=None, alpha=1.0, beta=0.0, trans_a=False, trans_b=False,
              bias=None, activation=None):
        """out = activation(alpha * op(a) @ op(b) + beta * out + bias).

        op(a) is m x k (a is k x m with trans_a; a 1-D a is one row, a GEMV),
        op(b) k x n; out m x n (1-D for a 1-D a). m or n up to 16 takes the
        small-shape path (nothing packed, the long side of b split over the
        workers). bias (n floats) and activation ("silu", "gelu") are
        applied as each tile is written (nxr_sgemm_fused)."""
        call = "sgemm"
        _memory.need_numpy(call)
        g = _lib.SgemmArgs()
        g.a = f32(call, "a", a, ndim=(1, 2))
        g.b = f32(call, "b", b, ndim=2)
        a2 = a.reshape(1, -1) if a.ndim == 1 else a
        if a.ndim == 1 and trans_a:
            raise invalid(call, "a: 1-D with trans_a")
        g.trans_a, g.trans_b = bool(trans_a), bool(trans_b)
        g.m, g.k = (a2.shape[1], a2.shape[0]) if trans_a else a2.shape
        kb, g.n = (b.shape[1], b.shape[0]) if trans_b else b.shape
        if kb != g.k:
            raise invalid(call, "b: shape %s does not follow a's k = %d" % (b.shape, g.k))
        g.lda, g.ldb, g.ldc = a2.shape[1], b.shape[1], g.n
        g.alpha, g.beta = alpha, beta
        shape = (g.n,) if a.ndim == 1 else (g.m, g.n)
        if out is None and beta != 0:
            raise invalid(call, "beta %g reads out, which was not given" % beta)
        out = self._out(call, out, shape)
        g.c = out.ctypes.data
        ep = self._epilogue(call, bias, activation, g.n)
        if ep is None:
            self._call("nxr_sgemm", _lib.lib.nxr_sgemm, ctypes.byref(g))
        else:
            self._call("nxr_sgemm_fused", _lib.lib.nxr_sgemm_fused, ctypes.byref(g),
                       ctypes.byref(ep))
        return out

    def sgemm_packed(self, a, weights, out=None, alpha=1.0, beta=0.0, trans_a=False, bias=None,
                     activation=None):
        """ctx.sgemm against packed weights (rt.pack): op(a) is m x weights.k
        (1-D: one row), out m x weights.n; the domain's own copy is read.
        Same bits as sgemm with the original matrix for f32 weights; bf16
        and q8 weights are within runtime/nxr_weights.h's bound of it."""
        call = "sgemm_packed"
        _memory.need_numpy(call)
        from nxr._weights import Weights

        if not isinstance(weights, Weights):
            raise invalid(call, "weights: expected nxr.Weights, got %s" % type(weights).__name__)
        g = _lib.SgemmPackedArgs()
        g.a = f32(call, "a", a, ndim=(1, 2))
        if a.ndim == 1 and trans_a:
            raise invalid(call, "a: 1-D with trans_a")
        a2 = a.reshape(1, -1) if a.ndim == 1 else a
        m, k = (a2.shape[1], a2.shape[0]) if trans_a else a2.shape
        if k != weights.k:
            raise invalid(call, "a: shape %s does not follow the weights' k = %d" % (a.shape, weights.k))
        g.trans_a, g.m, g.lda = bool(trans_a), m, a2.shape[1]
        g.alpha, g.beta, g.ldc = alpha, beta, weights.n
        if out is None and beta != 0:
            raise invalid(call, "beta %g reads out, which was not given" % beta)
        # Held from here to the call's return: Weights.close is refused
        # meanwhile, whichever thread calls it (nxr._weights, "In use").
        with weights._use(call) as wptr:
            out = self._out(call, out, (weights.n,) if a.ndim == 1 else (m, weights.n))
            g.c = out.ctypes.data
            g.w = wptr
            ep = self._epilogue(call, bias, activation, weights.n) or _lib.SgemmEpilogue()
            self._call("nxr_sgemm_packed", _lib.lib.nxr_sgemm_packed, ctypes.byref(g),
                       ctypes.byref(ep))
        return out

    def _epilogue(self, call, bias, activation, n):
        if activation not in _ACTIVATIONS:
            raise invalid(call, "activation %r: expected None, 'silu' or 'gelu'" % (activation,))
        if bias is None and activation is None:
            return None
        ep = _lib.SgemmEpilogue()
        ep.activation = _ACTIVATIONS[activation]
        if bias is not None:
            ep.bias = f32(call, "bias", bias, shape=(n,))
        return ep

    def _rows(self, call, name, x):
        """(rows, cols) of a 1-D (one row) or 2-D float32 array."""
        f32(call, name, x, ndim=(1, 2))
        return (1, x.shape[0]) if x.ndim == 1 else x.shape

    def rmsnorm(self, x, gamma, eps=1e-5, out=None):
        """Per row: out = x / sqrt(mean(x^2) + eps) * gamma (x 1-D or 2-D)."""
        call = "rmsnorm"
        _memory.need_numpy(call)
        rows, cols = self._rows(call, "x", x)
        f32(call, "gamma", gamma, shape=(cols,))
        out = self._out(call, out, x.shape)
        self._call("nxr_rmsnorm", _lib.lib.nxr_rmsnorm, rows, cols, x.ctypes.data, cols,
                   gamma.ctypes.data, eps, out.ctypes.data, cols)
        return out

    def layernorm(self, x, gamma, beta, eps=1e-5, out=None):
        """Per row: out = (x - mean) / sqrt(var + eps) * gamma + beta."""
        call = "layernorm"
        _memory.need_numpy(call)
        rows, cols = self._rows(call, "x", x)
        f32(call, "gamma", gamma, shape=(cols,))
        f32(call, "beta", beta, shape=(cols,))
        out = self._out(call, out, x.shape)
        self._call("nxr_layernorm", _lib.lib.nxr_layernorm, rows, cols, x.ctypes.data, cols,
                   gamma.ctypes.data, beta.ctypes.data, eps, out.ctypes.data, cols)
        return out

    def softmax(self, x, out=None):
        """Softmax of each row (x 1-D or 2-D)."""
        call = "softmax"
        _memory.need_numpy(call)
        rows, cols = self._rows(call, "x", x)
        out = self._out(call, out, x.shape)
        self._call("nxr_softmax", _lib.lib.nxr_softmax, rows, cols, x.ctypes.data, cols,
                   out.ctypes.data, cols)
        return out

    def _binary(self, call, op, x, y, out):
        _memory.need_numpy(call)
        f32(call, "x", x)
        f32(call, "y", y, shape=x.shape)
        out = self._out(call, out, x.shape)
        self._call("nxr_binary", _lib.lib.nxr_binary, op, x.size, x.ctypes.data, y.ctypes.data,
                   out.ctypes.data)
        return out

    def add(self, x, y, out=None):
        """out = x + y, elementwise (same shapes)."""
        return self._binary("add", _lib.BINARY_ADD, x, y, out)

    def mul(self, x, y, out=None):
        """out = x * y, elementwise (same shapes)."""
        return self._binary("mul", _lib.BINARY_MUL, x, y, out)

    def _rows_op(self, call, op, x, row, out):
        _memory.need_numpy(call)
        f32(call, "x", x, ndim=2)
        rows, cols = x.shape
        f32(call, "row", row, shape=(cols,))
        out = self._out(call, out, x.shape)
        self._call("nxr_binary_rows", _lib.lib.nxr_binary_rows, op, rows, cols, x.ctypes.data,
                   cols, row.ctypes.data, out.ctypes.data, cols)
        return out

    def add_rows(self, x, row, out=None):
        """out[r] = x[r] + row for each row r of 2-D x (a bias over a batch)."""
        return self._rows_op("add_rows", _lib.BINARY_ADD, x, row, out)

    def mul_rows(self, x, row, out=None):
        """out[r] = x[r] * row for each row r of 2-D x."""
        return self._rows_op("mul_rows", _lib.BINARY_MUL, x, row, out)

    def scale(self, x, alpha, out=None):
        """out = alpha * x."""
        call = "scale"
        _memory.need_numpy(call)
        f32(call, "x", x)
        out = self._out(call, out, x.shape)
        self._call("nxr_scale", _lib.lib.nxr_scale, x.size, x.ctypes.data, alpha, out.ctypes.data)
        return out

    def _unary(self, call, op, x, out):
        _memory.need_numpy(call)
        f32(call, "x", x)
        out = self._out(call, out, x.shape)
        self._call("nxr_unary", _lib.lib.nxr_unary, op, x.size, x.ctypes.data, out.ctypes.data)
        return out

    def silu(self, x, out=None):
        """out = x * sigmoid(x)."""
        return self._unary("silu", _lib.UNARY_SILU, x, out)

    def gelu(self, x, out=None):
        """out = GELU(x), tanh approximation."""
        return self._unary("gelu", _lib.UNARY_GELU_TANH, x, out)

    def triad(self, b, c, s, out=None):
        """STREAM triad: out = b + s * c."""
        call = "triad"
        _memory.need_numpy(call)
        f32(call, "b", b)
        f32(call, "c", c, shape=b.shape)
        out = self._out(call, out, b.shape)
        self._call("nxr_triad", _lib.lib.nxr_triad, b.size, b.ctypes.data, c.ctypes.data, s,
                   out.ctypes.data)
        return out

    def _reduce(self, call, fn, x, ctype):
        _memory.need_numpy(call)
        f32(call, "x", x)
        r = ctype()
        self._call(call, fn, x.size, x.ctypes.data, ctypes.byref(r))
        return r.value

    def sum(self, x):
        """The sum of x's elements (a float)."""
        return self._reduce("nxr_sum", _lib.lib.nxr_sum, x, ctypes.c_float)

    def max(self, x):
        """The largest element of x (a float)."""
        return self._reduce("nxr_max", _lib.lib.nxr_max, x, ctypes.c_float)

    def argmax(self, x):
        """The flat index of x's largest element (an int)."""
        return self._reduce("nxr_argmax", _lib.lib.nxr_argmax, x, ctypes.c_size_t)
