"""nxr.Weights: a weight matrix packed once per domain (runtime/nxr_weights.h).

rt.pack(w) copies w into each domain's node memory in the layout nxr's
GEMM reads; ctx.sgemm_packed(x, weights) then multiplies against the copy
of the context's domain, packing nothing per call, with the same bits as
ctx.sgemm(x, w). The caller's w may be dropped after pack. The copies are
freed by close() or when the object is collected; the runtime stays until
then (nxr._runtime, "Lifetime").
"""
import ctypes
import weakref

from nxr import _lib
from nxr._errors import check, invalid
from nxr._memory import need_numpy


class Weights:
    def __init__(self, runtime, handle, w, trans, domains):
        need_numpy("pack")
        from nxr._context import f32

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
                ids = (ctypes.c_int * len(domains))(*domains)
            except TypeError:
                raise invalid("pack", "domains must be a sequence of int ids, got %r" % (domains,))
            desc.domain_ids = ids
            desc.domain_count = len(domains)
        out = ctypes.c_void_p()
        check(
            _lib.lib.nxr_weights_create(handle.ptr, ctypes.byref(desc), ctypes.byref(out)),
            "nxr_weights_create",
        )
        self.ptr = out
        self.k, self.n = desc.k, desc.n
        # handle rides along: the runtime outlives its weights.
        self._free = weakref.finalize(self, _destroy, out, handle)

    def close(self):
        """Frees every copy now (not while a call against them runs)."""
        self._free()

    @property
    def closed(self):
        return not self._free.alive

    def __repr__(self):
        return "<nxr.Weights k=%d n=%d%s>" % (self.k, self.n, " closed" if self.closed else "")


def _destroy(ptr, handle):
    _lib.lib.nxr_weights_destroy(ptr)
