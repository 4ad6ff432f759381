"""nxr.Runtime: one nxr runtime (its domains' worker teams and pools).

Lifetime. The C runtime lives in a _Handle. The Runtime holds it until
close() (or the end of its `with` block); so does everything allocated from
it that must not outlive it: domain memory behind numpy arrays and packed
weights. close() destroys the runtime's contexts at once and drops the
Runtime's hold: when nothing else holds the handle, nxr_runtime_destroy
runs then and there (its workers joined before close() returns); otherwise
it runs when the last array or weights object is collected, so an array
that outlives its `with` block stays valid memory. Every call on a closed
Runtime, or on one of its contexts, raises nxr.Error(EINVAL).

Order. The runtime goes after its contexts and its submitted batches,
whatever the collector does. Two objects: the _Handle owns only the
nxr_runtime_t * (arrays and weights hold it, from their finalizers'
arguments, so it must reach nothing of the user's); the _Work, held by the
Runtime, lists the batches not yet waited for (nxr._context keeps them
alive until then, "Jobs") and the pointers of the contexts not yet
destroyed, and holds the _Handle. The _Work's teardown (its __del__: after
every weakref finalizer of the same garbage, so a context's own finalizer
comes first; or its exit finalizer) waits for those batches and destroys
those contexts; only then does it let go of the _Handle, whose finalizer
destroys the runtime once no array or weights object holds it either.

Inside a body. close() inside a body raises nxr.Error(NXR_EREENTRANT) and
changes nothing (nxr_runtime_destroy would wait for the operation running
the body); a teardown the collector starts inside a body (the last array
of a closed runtime dropped there) runs once the call that ran the body
returned (nxr._bodies).
"""
import collections
import ctypes
import json
import threading
import weakref

from nxr import _args, _bodies, _lib, _memory
from nxr._errors import ERRNOS, NXR_CODES, Error, check
from nxr._context import Context, close_context
from nxr._weights import Weights

Domain = collections.namedtuple("Domain", "id node cpus workers budget")
Domain.__doc__ = "A domain of a runtime: OS node (-1: none), CPU ids, workers, thread budget."


def _finish(contexts, batches, handle=None):
    """Waits for the batches not waited for, then destroys the contexts not
    destroyed (outside every body); then lets go of handle (the caller's
    last use of it)."""
    for b in list(batches):
        b.finish(batches)
    for c in list(contexts):
        close_context(c, contexts)


def _destroy_runtime(ptr):
    _bodies.later(_lib.lib.nxr_runtime_destroy, ptr)


class _Handle:
    """Owns an nxr_runtime_t *: destroyed when the last holder lets go (the
    _Work, arrays, weights); holds nothing else."""

    def __init__(self, ptr):
        self.ptr = ptr
        self._destroy = weakref.finalize(self, _destroy_runtime, ptr)


def _work_at_exit(ref):
    w = ref()
    if w is not None:  # else its __del__ ran
        w.__del__()


class _Work:
    """What must go before the runtime: the batches not waited for and the
    contexts not destroyed (see "Order"); holds the _Handle until they went."""

    def __init__(self, handle):
        self.handle = handle
        self.contexts = set()  # nxr_ctx_t * values not destroyed yet
        self.batches = set()  # nxr._context._Batch not waited for yet
        self._gone = False
        # Created after the handle's: at exit it runs first (reverse order).
        # A weak reference: the finalizer must not keep this alive.
        self._exit = weakref.finalize(self, _work_at_exit, weakref.ref(self))

    def finish(self):
        _finish(self.contexts, self.batches)

    def __del__(self):
        if self._gone:
            return
        self._gone = True
        # The sets and the handle ride along: a teardown kept for later
        # keeps the batches' callbacks, and the runtime, until it ran.
        _bodies.later(_finish, self.contexts, self.batches, self.handle)


class Runtime:
    """nxr.Runtime(domains=None, topology=None, num_threads=None, ignore_env=False)

    domains: the NXR_DOMAINS grammar ("0:0-3;1:4-7/2"); None: NXR_DOMAINS,
    else one domain per NUMA node. topology: "hwloc", "synthetic:<hwloc
    synthetic description>" or "xml:<path>"; None: NXR_TOPOLOGY, else this
    machine. num_threads caps every domain's budget. ignore_env ignores
    every NXR_* variable. Raises nxr.Error with the library's detail
    (NXR_ESYNTAX, NXR_EOVERLAP, ...) when the runtime cannot be made.
    Blocks until every worker started. Use it as a context manager.
    """

    def __init__(self, domains=None, topology=None, num_threads=None, ignore_env=False):
        opts = _lib.RuntimeOpts()
        _lib.lib.nxr_runtime_opts_init(ctypes.byref(opts))
        # Kept referenced until the call returns (ctypes does not copy).
        enc = [s.encode() if s is not None else None for s in (domains, topology)]
        opts.domains, opts.topology = enc
        if num_threads is not None:
            opts.num_threads = _args.c_int("Runtime", "num_threads", num_threads, low=1)
        opts.ignore_env = bool(ignore_env)
        rc, ptr = _lib.runtime_create(opts)
        check(rc, "nxr_runtime_create")
        self._handle = _Handle(ptr)
        self._work = _Work(self._handle)
        self._lock = threading.Lock()  # the context set and close
        self._contexts = weakref.WeakSet()
        self._domains = None

    # ---- lifetime ----------------------------------------------------
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    @property
    def closed(self):
        return self._handle is None

    def close(self):
        """Waits for the jobs submitted on it, destroys every context opened on
        it, then lets go of the runtime (destroyed now, or when the last
        array or weights object from it goes). Raises nxr.Error(EBUSY) when
        another thread is inside a call on one of its contexts, and
        NXR_EREENTRANT inside a body; a refused close changes nothing. A
        second close is a no-op."""
        if _bodies.inside():
            raise Error(
                NXR_CODES["NXR_EREENTRANT"],
                "Runtime.close: called inside a body, where destroying a runtime would wait "
                "for the operation running it; the runtime is left open: close it outside "
                "every body",
                "Runtime.close",
            )
        with self._lock:
            if self._handle is None:
                return
            ctxs = list(self._contexts)
            held = []
            try:
                for c in ctxs:
                    if not c._lock.acquire(blocking=False):
                        raise Error(
                            ERRNOS["EBUSY"],
                            "Runtime.close: a thread is inside a call on the context of domain "
                            "%d" % c.domain_id,
                            "Runtime.close",
                        )
                    held.append(c)
                for c in ctxs:
                    c._destroy()
            finally:
                for c in held:
                    c._lock.release()
            # Batches and contexts no live object holds any more (their
            # Context was collected): before the runtime too.
            self._work.finish()
            w, self._work, self._handle = self._work, None, None
        del w  # the last holder of the handle, unless arrays or weights hold it
        _bodies.run_later()

    def _ptr(self, call):
        h = self._handle
        if h is None:
            raise Error(ERRNOS["EINVAL"], "%s: the runtime is closed" % call, call)
        return h

    # ---- what it is ----------------------------------------------------
    def info(self):
        """nxr_runtime_describe's JSON (the output of `nxr info --json`) as a dict."""
        h = self._ptr("info")
        out = ctypes.c_void_p()
        check(
            _lib.lib.nxr_runtime_describe(h.ptr, _lib.DESCRIBE_JSON, ctypes.byref(out)),
            "nxr_runtime_describe",
        )
        try:
            return json.loads(ctypes.string_at(out.value).decode())
        finally:
            _lib.free(out)

    @property
    def domains(self):
        """The domains, in creation order (a list of nxr.Domain)."""
        if self._domains is None:
            self._domains = [
                Domain(d["id"], d["node"], tuple(d["cpus"] or ()), d["workers"], d["budget"])
                for d in self.info()["domains"]
            ]
        return list(self._domains)

    def _domain_ptr(self, call, domain_id):
        domain_id = _args.c_int(call, "domain", domain_id)
        h = self._ptr(call)
        d = ctypes.c_void_p()
        check(_lib.lib.nxr_runtime_domain(h.ptr, domain_id, ctypes.byref(d)), call)
        return h, d

    # ---- contexts ------------------------------------------------------
    def context(self, domain):
        """A context on domain id `domain` (an id of rt.domains): the handle one
        thread drives that domain's work and kernels through."""
        domain = _args.c_int("context", "domain", domain)
        h = self._ptr("context")
        rc, ptr = _lib.ctx_create(h.ptr, domain)
        check(rc, "nxr_ctx_create")
        return self._adopt(ptr)

    def context_here(self):
        """A context on the calling thread's domain (placed by taskset, numactl,
        MPI or an earlier bind)."""
        h = self._ptr("context_here")
        rc, ptr = _lib.ctx_create_here(h.ptr)
        check(rc, "nxr_ctx_create_here")
        return self._adopt(ptr)

    def _adopt(self, ptr):
        c = Context(self, self._work, ptr)
        with self._lock:
            self._contexts.add(c)
        return c

    # ---- memory and weights -------------------------------------------
    def empty(self, domain, shape, dtype=None):
        """An uninitialised numpy array in domain `domain`'s node memory (see
        Context.empty)."""
        h, d = self._domain_ptr("empty", domain)
        return _memory.empty(h, d, "empty", shape, dtype)

    def replicate(self, array):
        """One copy of `array` per domain, each in its domain's node memory and
        checked page by page where the domain's memory is bound to a node
        (nxr.Error(NXR_EPLACEMENT) otherwise). Returns a list in the order of
        rt.domains."""
        copies = []
        for dom in self.domains:
            h, d = self._domain_ptr("replicate", dom.id)
            copies.append(_memory.replicate_one(h, d, dom, array))
        return copies

    def pack(self, w, trans=False, domains=None, format="f32"):
        """Packs weight matrix w (op(W) is k x n: w is k x n, or n x k with
        trans) once into the node memory of each listed domain id (None:
        every domain) for ctx.sgemm_packed, in format "f32" (the same bits
        as ctx.sgemm), "bf16" or "q8" (8-bit blocks of 32 along k; w must
        be finite): see nxr._weights. Returns nxr.Weights."""
        return Weights(self, self._ptr("pack"), w, trans, domains, format)
