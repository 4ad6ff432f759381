"""nxr: a NUMA-aware executor runtime, from Python (ctypes over libnxr.so).

    import numpy as np, nxr
    with nxr.Runtime() as rt:                 # one domain per NUMA node
        print(rt.domains, rt.info()["providers"])
        ctx = rt.context(rt.domains[0].id)    # one context per thread per domain
        with ctx.bind():                      # this thread on the domain's CPUs
            x = ctx.empty((4, 256))           # float32, in the domain's node memory
            x[...] = 1
            w = rt.pack(np.ones((256, 512), np.float32))   # packed once per domain
            y = ctx.sgemm_packed(x, w, activation="silu")
            p = ctx.softmax(ctx.rmsnorm(y, np.ones(512, np.float32)))

Errors are nxr.Error (.status: nxr.EINVAL, nxr.NXR_EOVERLAP, ...; .detail:
the library's detail). The GIL is released inside every nxr call. A context
is driven by one thread at a time (a second thread gets nxr.Error(EBUSY));
a body's calls on its own context run in place (nxr._context, "Bodies").
Counts, sizes and ids are checked before ctypes converts them (EINVAL).
The library: $NXR_LIBRARY, else the one installed with this package, else
ctypes.util.find_library("nxr"); its version is checked at import, before
any other symbol is bound (an ImportError naming both versions).

Ctrl-C. Python raises KeyboardInterrupt in the main thread only when that
thread runs Python bytecode, so it is not seen until the current nxr call
returns (or the main thread runs a body of it, whose KeyboardInterrupt
the call re-raises once it returned): a parallel_for whose callback never
returns, or a Job.wait for such a task, cannot be interrupted.
"""
# Loading _lib checks the library's version (an ImportError naming both
# versions) before it binds any prototype.
from nxr import _build, _lib
from nxr._errors import ERRNOS, NXR_CODES, Error, status_name

__version__ = _build.VERSION

library_path = _lib.path
library_version = _lib.lib.nxr_version_string().decode()

from nxr._runtime import Domain, Runtime  # noqa: E402
from nxr._context import Context, Job  # noqa: E402
from nxr._weights import Weights  # noqa: E402
from nxr._memory import nodes, pages_on_node  # noqa: E402

globals().update(ERRNOS)
globals().update(NXR_CODES)

__all__ = ["Runtime", "Context", "Job", "Weights", "Domain", "Error", "status_name", "nodes",
           "pages_on_node",
           "library_path", "library_version", "__version__"] + list(ERRNOS) + list(NXR_CODES)
