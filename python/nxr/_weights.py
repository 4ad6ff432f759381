"""nxr.Weights: a weight matrix packed once per domain (runtime/nxr_weights.h).

rt.pack(w) copies w into each domain's node memory in the layout nxr's
GEMM reads; ctx.sgemm_packed(x, weights) then multiplies against the copy
of the context's domain, packing nothing per call, with the same bits as
ctx.sgemm(x, w). rt.pack(w, format="bf16") or format="q8" packs the weights
in bfloat16 or in signed 8-bit blocks of 32 along k with one scale each
(half and about a quarter of the bytes); the call is then within the bound
runtime/nxr_weights.h documents of the f32 result, not bit-equal to it. The caller's w may be dropped after pack. The copies are
freed by close() or when the object is collected; the runtime stays until
then (nxr._runtime, "Lifetime").

In use. Every call that reads the copies (ctx.sgemm_packed) holds the
object for its duration (_use); close() while a call holds it, from any
thread, raises nxr.Error(EBUSY) and frees nothing: close once the calls
returned (a call after close raises nxr.Error(EINVAL), "closed").
"""
import contextlib
import ctypes
import threading
import weakref

from nxr import _args, _lib
from nxr._errors import ERRNOS, Error, check, invalid
from nxr._memory import need_numpy


# format= of rt.pack: enum nxr_weights_format (runtime/nxr_weights.h).
FORMATS = {"f32": 0, "bf16": 1, "q8": 2}


class Weights:
    def __init__(self, runtime, handle, w, trans, domains, format="f32"):
        need_numpy("pack")
        from nxr._context import f32

        if not isinstance(format, str) or format not in FORMATS:
            raise invalid("pack", "format %r: expected 'f32', 'bf16' or 'q8'" % (format,))
        f32("pack", "w", w, ndim=2)
        desc = _lib.WeightsDesc()
        _lib.lib.nxr_weights_desc_init(ctypes.byref(desc))
        desc.trans = bool(trans)
        rows, cols = w.shape
        desc.k, desc.n = (cols, rows) if trans else (rows, cols)
        desc.w = w.ctypes.data
        desc.ldw = cols
        ids = None
        if domains is not None:
            try:
                domains = [_args.c_int("pack", "domains[%d]" % i, d) for i, d in enumerate(domains)]
            except TypeError:
                raise invalid("pack", "domains must be a sequence of int ids, got %r" % (domains,))
            ids = (ctypes.c_int * len(domains))(*domains)
            desc.domain_ids = ids
            desc.domain_count = len(domains)
        out = ctypes.c_void_p()
        check(
            _lib.lib.nxr_weights_create_format(
                handle.ptr, ctypes.byref(desc), FORMATS[format], ctypes.byref(out)
            ),
            "nxr_weights_create_format",
        )
        self.ptr = out
        self.k, self.n = desc.k, desc.n
        self.format = format
        # handle rides along: the runtime outlives its weights.
        self._free = weakref.finalize(self, _destroy, out, handle)
        self._lock = threading.Lock()  # users and close
        self._users = 0  # calls holding the copies now

    @contextlib.contextmanager
    def _use(self, call):
        """Holds the copies for one call: close() is refused until it returns."""
        with self._lock:
            if not self._free.alive:
                raise invalid(call, "weights: closed")
            self._users += 1
        try:
            yield self.ptr
        finally:
            with self._lock:
                self._users -= 1

    def close(self):
        """Frees every copy now; a no-op once closed. nxr.Error(EBUSY), nothing
        freed, while a call (on any thread) is using them."""
        with self._lock:
            if self._users:
                raise Error(
                    ERRNOS["EBUSY"],
                    "Weights.close: in use by %d call(s) (ctx.sgemm_packed); close them after "
                    "the calls returned" % self._users,
                    "Weights.close",
                )
            self._free()

    @property
    def closed(self):
        return not self._free.alive

    def __repr__(self):
        return "<nxr.Weights k=%d n=%d %s%s>" % (
            self.k, self.n, self.format, " closed" if self.closed else ""
        )


def _destroy(ptr, handle):
    _lib.lib.nxr_weights_destroy(ptr)
