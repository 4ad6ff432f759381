"""Domain memory as numpy arrays, without a copy.

An array from empty() is a view of one pool buffer of its domain
(nxr_buffer_acquire: memory bound to the domain's node before first touch,
counted as "outstanding" in the runtime's describe JSON until released).
The buffer's owner is a ctypes array over its bytes, which numpy keeps as
the array's base (every view keeps it too); a finalizer on that owner
releases the buffer when the last array over it is collected, and holds
the runtime until then (nxr._runtime, "Lifetime").
"""
import ctypes
import weakref

from nxr import _args, _lib
from nxr._errors import NXR_CODES, Error, check, invalid

try:
    import numpy
except ImportError:  # the runtime, contexts and bind work without numpy
    numpy = None

PAGE = 4096


def need_numpy(call):
    if numpy is None:
        raise Error(
            NXR_CODES["NXR_EUNSUPPORTED"], "%s: needs numpy, which this Python lacks" % call, call
        )


def _release(buffer, handle):
    # handle: held so that the runtime outlives its buffer (unused here).
    _lib.lib.nxr_buffer_release(buffer)


def empty(handle, domain, call, shape, dtype):
    need_numpy(call)
    dtype = numpy.dtype(numpy.float32 if dtype is None else dtype)
    shape, count = _args.shape(call, shape, dtype.itemsize)
    size = max(count * dtype.itemsize, 1)  # a buffer of 0 bytes is EINVAL
    buf = ctypes.c_void_p()
    check(_lib.lib.nxr_buffer_acquire(domain, size, ctypes.byref(buf)), "nxr_buffer_acquire")
    try:
        owner = (ctypes.c_char * size).from_address(_lib.lib.nxr_buffer_data(buf))
    except BaseException:
        _lib.lib.nxr_buffer_release(buf)  # a failed call leaves no buffer behind
        raise
    weakref.finalize(owner, _release, buf.value, handle)
    return numpy.frombuffer(owner, dtype=dtype, count=count).reshape(shape)


def nodes(array):
    """{node: pages} of the pages an array's memory spans, asked of the kernel
    (nxr_mem_node; a negative key is the errno of a page that could not be
    placed, e.g. -ENOENT for a page never touched)."""
    need_numpy("nodes")
    start = array.ctypes.data
    end = start + max(array.nbytes, 1)
    out = {}
    page = start - start % PAGE
    while page < end:
        n = _lib.lib.nxr_mem_node(max(page, start))
        out[n] = out.get(n, 0) + 1
        page += PAGE
    return out


def pages_on_node(array, node):
    """(pages, on_node): how many pages an array's memory spans, and how many
    of them the kernel reports on `node` (nxr_mem_pages_on_node: for memory
    already written; a page the kernel is moving when asked, as in a
    huge-page collapse, is asked again rather than counted off the node)."""
    need_numpy("pages_on_node")
    pages, on = ctypes.c_size_t(0), ctypes.c_size_t(0)
    rc = _lib.lib.nxr_mem_pages_on_node(
        array.ctypes.data, max(array.nbytes, 1), node, ctypes.byref(pages), ctypes.byref(on)
    )
    check(rc, "pages_on_node")
    return pages.value, on.value


def replicate_one(handle, domain, dom, array):
    need_numpy("replicate")
    if not isinstance(array, numpy.ndarray):
        raise invalid("replicate", "expected a numpy.ndarray, got %s" % type(array).__name__)
    copy = empty(handle, domain, "replicate", array.shape, array.dtype)
    copy[...] = array  # first touch by this thread; the pages are bound already
    if _lib.lib.nxr_domain_mem_binding(domain) == _lib.MEM_BOUND and dom.node >= 0:
        pages, on = pages_on_node(copy, dom.node)
        if on < pages:
            where = nodes(copy)
            raise Error(
                NXR_CODES["NXR_EPLACEMENT"],
                "replicate: domain %d's copy has pages off its node %d: %r"
                % (dom.id, dom.node, where),
                "replicate",
            )
    return copy
