"""The one place the binding meets libnxr: finding and loading the shared
library, every ctypes prototype and struct mirror of the 1.0 API
(docs/api-1.0.md), the constructors' calling shape and where a failed
call's detail is read (nxr_last_error). The rest of the package calls
lib.<name> with these prototypes and the wrappers below.

Loading. The library is the first of: the file named by NXR_LIBRARY; the
one installed beside this package (the path tools/install.sh wrote into
_build.py, relative to the package directory, so a moved prefix still
works); ctypes.util.find_library("nxr"). It is opened with ctypes.CDLL,
which releases the GIL for the duration of every foreign call: two Python
threads driving two contexts run their kernels at the same time, and a
worker calling back into Python (parallel_for, submit) can take the GIL
while the driver waits inside nxr. Its version is checked before any
prototype but the version calls is bound: a library too old for this
package is an ImportError naming both versions (not an AttributeError for
the first symbol it lacks), and a symbol missing from a library of the
right version is an ImportError naming it.

Struct mirrors follow the installed headers field by field; the tests
compile a C program against those headers and compare every offset and
size (python/tests/test_layout.py), so a header change that this file did
not follow fails there, not in a corrupted call.
"""
import ctypes
import ctypes.util
import os

from nxr import _build

c_int, c_uint, c_size_t, c_float, c_bool = (
    ctypes.c_int,
    ctypes.c_uint,
    ctypes.c_size_t,
    ctypes.c_float,
    ctypes.c_bool,
)
c_char_p, c_void_p = ctypes.c_char_p, ctypes.c_void_p
P = ctypes.POINTER

# enum nxr_describe_format, enum nxr_binary_op, enum nxr_unary_op,
# enum nxr_activation, enum nxr_mode, enum nxr_mem_binding.
DESCRIBE_JSON = 1
DESCRIBE_PROMETHEUS = 2
BINARY_ADD, BINARY_MUL = 0, 1
UNARY_SILU, UNARY_GELU_TANH = 0, 1
ACTIVATION_NONE, ACTIVATION_SILU, ACTIVATION_GELU_TANH = 0, 1, 2
MODE_OUTER = 2
MEM_BOUND = 0
DOMAIN_AUTO = -1
FAMILY_COUNT = 4  # NXR_FAMILY_COUNT


class RuntimeOpts(ctypes.Structure):
    """struct nxr_runtime_opts (runtime/nxr.h)."""

    _fields_ = [
        ("topology", c_char_p),
        ("domains", c_char_p),
        ("domain_decls", c_void_p),
        ("domain_decl_count", c_size_t),
        ("allowed_cpus", c_void_p),
        ("num_threads", c_int),
        ("cpu_quota", c_int),
        ("cgroup_root", c_char_p),
        ("peers", c_int),  # enum nxr_peers_mode
        ("peers_dir", c_char_p),
        ("spin", c_int),
        ("providers", c_void_p * FAMILY_COUNT),
        ("provider_policy", c_int),  # enum nxr_provider_policy
        ("has_pool_cap", c_bool),
        ("pool_cap", c_size_t),
        ("route_policy", c_int),  # enum nxr_route_policy
        ("stall_report_ms", c_int),
        ("ignore_env", c_bool),
    ]


class SgemmArgs(ctypes.Structure):
    """struct nxr_sgemm_args (kernels/nxr_kernels.h)."""

    _fields_ = [
        ("trans_a", c_bool),
        ("trans_b", c_bool),
        ("m", c_size_t),
        ("n", c_size_t),
        ("k", c_size_t),
        ("alpha", c_float),
        ("a", c_void_p),
        ("lda", c_size_t),
        ("b", c_void_p),
        ("ldb", c_size_t),
        ("beta", c_float),
        ("c", c_void_p),
        ("ldc", c_size_t),
    ]


class SgemmEpilogue(ctypes.Structure):
    """struct nxr_sgemm_epilogue (kernels/nxr_kernels.h)."""

    _fields_ = [("bias", c_void_p), ("activation", c_int)]


class WeightsDesc(ctypes.Structure):
    """struct nxr_weights_desc (runtime/nxr_weights.h)."""

    _fields_ = [
        ("trans", c_bool),
        ("k", c_size_t),
        ("n", c_size_t),
        ("w", c_void_p),
        ("ldw", c_size_t),
        ("domain_ids", P(c_int)),
        ("domain_count", c_size_t),
    ]


class SgemmPackedArgs(ctypes.Structure):
    """struct nxr_sgemm_packed_args (runtime/nxr_weights.h)."""

    _fields_ = [
        ("trans_a", c_bool),
        ("m", c_size_t),
        ("alpha", c_float),
        ("a", c_void_p),
        ("lda", c_size_t),
        ("w", c_void_p),
        ("beta", c_float),
        ("c", c_void_p),
        ("ldc", c_size_t),
    ]


STATS_VERSION = 1  # NXR_STATS_VERSION
STATS_FAMILIES = 8  # NXR_STATS_FAMILIES
STATS_ROUTE_REASONS = 8  # NXR_STATS_ROUTE_REASONS
c_uint64 = ctypes.c_uint64


class DomainStats(ctypes.Structure):
    """struct nxr_domain_stats (runtime/nxr_stats.h)."""

    _fields_ = [
        ("id", c_int),
        ("node", c_int),
        ("workers", c_uint),
        ("budget", c_uint),
        ("regions", c_uint64),
        ("tasks", c_uint64),
        ("kernel_calls", c_uint64 * STATS_FAMILIES),
        ("busy_ns", c_uint64),
        ("spin_ns", c_uint64),
        ("parks", c_uint64),
        ("wakes", c_uint64),
        ("admission_waits", c_uint64),
        ("admission_wait_ns", c_uint64),
        ("admission_wait_max_ns", c_uint64),
        ("admission_joins", c_uint64),
        ("routed", c_uint64 * STATS_ROUTE_REASONS),
        ("pool_hits", c_uint64),
        ("pool_misses", c_uint64),
        ("pool_drops", c_uint64),
        ("pool_cached_bytes", c_uint64),
        ("pool_outstanding", c_uint64),
        ("weight_bytes", c_uint64),
    ]


class RuntimeStats(ctypes.Structure):
    """struct nxr_runtime_stats (runtime/nxr_stats.h)."""

    _fields_ = [
        ("size", c_size_t),
        ("domain_size", c_size_t),
        ("domains", P(DomainStats)),
        ("domain_cap", c_size_t),
        ("version", c_uint),
        ("domain_count", c_size_t),
        ("cpu_quota", c_uint),
        ("stalls", c_uint64),
        ("cpu_quota_us", c_uint64),
        ("cpu_period_us", c_uint64),
        ("nr_throttled", c_uint64),
        ("throttled_usec", c_uint64),
        ("throttle_status", c_int),
        ("budget_changes", c_uint64),
        ("budget_changed_ns", c_uint64),
    ]


# The structs test_layout.py checks against the installed headers: the
# mirror and the C type it stands for.
MIRRORS = [
    (RuntimeOpts, "struct nxr_runtime_opts"),
    (SgemmArgs, "struct nxr_sgemm_args"),
    (SgemmEpilogue, "struct nxr_sgemm_epilogue"),
    (WeightsDesc, "struct nxr_weights_desc"),
    (SgemmPackedArgs, "struct nxr_sgemm_packed_args"),
    (DomainStats, "struct nxr_domain_stats"),
    (RuntimeStats, "struct nxr_runtime_stats"),
]

FOR_FN = ctypes.CFUNCTYPE(None, c_void_p, c_size_t, c_size_t, c_uint)
TASK_FN = ctypes.CFUNCTYPE(c_int, c_void_p, c_size_t)

# name: (restype, argtypes). The prototypes of the installed headers.
_PROTOTYPES = {
    "nxr_version": (c_uint, []),
    "nxr_version_string": (c_char_p, []),
    "nxr_strerror": (c_char_p, [c_int]),
    "nxr_last_error": (c_char_p, []),
    "nxr_runtime_opts_init": (None, [P(RuntimeOpts)]),
    "nxr_runtime_create": (c_int, [P(RuntimeOpts), P(c_void_p)]),
    "nxr_runtime_destroy": (None, [c_void_p]),
    "nxr_runtime_describe": (c_int, [c_void_p, c_int, P(c_void_p)]),
    "nxr_runtime_stats_init": (None, [P(RuntimeStats), P(DomainStats), c_size_t]),
    "nxr_runtime_stats": (c_int, [c_void_p, P(RuntimeStats)]),
    "nxr_runtime_refresh_budget": (c_int, [c_void_p]),
    "nxr_runtime_domain_count": (c_size_t, [c_void_p]),
    "nxr_runtime_domain_at": (c_void_p, [c_void_p, c_size_t]),
    "nxr_runtime_domain": (c_int, [c_void_p, c_int, P(c_void_p)]),
    "nxr_domain_id": (c_int, [c_void_p]),
    "nxr_domain_node": (c_int, [c_void_p]),
    "nxr_domain_workers": (c_uint, [c_void_p]),
    "nxr_domain_budget": (c_uint, [c_void_p]),
    "nxr_domain_mem_binding": (c_int, [c_void_p]),
    "nxr_ctx_create": (c_int, [c_void_p, c_int, P(c_void_p)]),
    "nxr_ctx_create_here": (c_int, [c_void_p, P(c_void_p)]),
    "nxr_ctx_destroy": (None, [c_void_p]),
    "nxr_ctx_domain": (c_void_p, [c_void_p]),
    "nxr_ctx_bind": (c_int, [c_void_p, P(c_void_p)]),
    "nxr_thread_binding_restore": (c_int, [c_void_p]),
    "nxr_parallel_for": (c_int, [c_void_p, c_size_t, c_size_t, c_size_t, FOR_FN, c_void_p]),
    "nxr_submit": (c_int, [c_void_p, c_size_t, TASK_FN, c_void_p, P(c_void_p)]),
    "nxr_job_wait": (c_int, [c_void_p]),
    "nxr_buffer_acquire": (c_int, [c_void_p, c_size_t, P(c_void_p)]),
    "nxr_buffer_release": (None, [c_void_p]),
    "nxr_buffer_data": (c_void_p, [c_void_p]),
    "nxr_mem_node": (c_int, [c_void_p]),
    "nxr_mem_pages_on_node": (c_int, [c_void_p, c_size_t, c_int, P(c_size_t), P(c_size_t)]),
    "nxr_sgemm": (c_int, [c_void_p, P(SgemmArgs)]),
    "nxr_sgemm_fused": (c_int, [c_void_p, P(SgemmArgs), P(SgemmEpilogue)]),
    "nxr_weights_desc_init": (None, [P(WeightsDesc)]),
    "nxr_weights_create": (c_int, [c_void_p, P(WeightsDesc), P(c_void_p)]),
    "nxr_weights_create_format": (c_int, [c_void_p, P(WeightsDesc), c_int, P(c_void_p)]),
    "nxr_weights_format": (c_int, [c_void_p]),
    "nxr_weights_destroy": (None, [c_void_p]),
    "nxr_weights_k": (c_size_t, [c_void_p]),
    "nxr_weights_n": (c_size_t, [c_void_p]),
    "nxr_sgemm_packed": (c_int, [c_void_p, P(SgemmPackedArgs), P(SgemmEpilogue)]),
    "nxr_binary": (c_int, [c_void_p, c_int, c_size_t, c_void_p, c_void_p, c_void_p]),
    "nxr_binary_rows": (
        c_int,
        [c_void_p, c_int, c_size_t, c_size_t, c_void_p, c_size_t, c_void_p, c_void_p, c_size_t],
    ),
    "nxr_scale": (c_int, [c_void_p, c_size_t, c_void_p, c_float, c_void_p]),
    "nxr_unary": (c_int, [c_void_p, c_int, c_size_t, c_void_p, c_void_p]),
    "nxr_triad": (c_int, [c_void_p, c_size_t, c_void_p, c_void_p, c_float, c_void_p]),
    "nxr_sum": (c_int, [c_void_p, c_size_t, c_void_p, P(c_float)]),
    "nxr_max": (c_int, [c_void_p, c_size_t, c_void_p, P(c_float)]),
    "nxr_argmax": (c_int, [c_void_p, c_size_t, c_void_p, P(c_size_t)]),
    "nxr_softmax": (c_int, [c_void_p, c_size_t, c_size_t, c_void_p, c_size_t, c_void_p, c_size_t]),
    "nxr_rmsnorm": (
        c_int,
        [c_void_p, c_size_t, c_size_t, c_void_p, c_size_t, c_void_p, c_float, c_void_p, c_size_t],
    ),
    "nxr_layernorm": (
        c_int,
        [
            c_void_p,
            c_size_t,
            c_size_t,
            c_void_p,
            c_size_t,
            c_void_p,
            c_void_p,
            c_float,
            c_void_p,
            c_size_t,
        ],
    ),
}


def _candidates():
    """Where the library may be, in the order tried, with how each was found."""
    env = os.environ.get("NXR_LIBRARY")
    if env:
        return [(env, "NXR_LIBRARY")]
    found = []
    if _build.LIBRARY:
        here = os.path.dirname(os.path.abspath(__file__))
        found.append((os.path.normpath(os.path.join(here, _build.LIBRARY)), "the install"))
    name = ctypes.util.find_library("nxr")
    if name:
        found.append((name, "ctypes.util.find_library"))
    return found


def _load():
    tried = []
    for path, how in _candidates():
        try:
            return ctypes.CDLL(path), path
        except OSError as e:
            tried.append("%s (%s): %s" % (path, how, e))
    raise ImportError(
        "nxr: cannot load libnxr.so.%s; tried %s. Set NXR_LIBRARY to the library's path."
        % (_build.VERSION.split(".")[0], "; ".join(tried) if tried else "nothing (no candidate)")
    )


# What every libnxr exports, whatever its version: bound first, so that the
# version is checked before any other symbol is looked up (an older library
# lacks some: the ImportError below names both versions, not the symbol).
_VERSION_PROTOTYPES = ("nxr_version", "nxr_version_string")


def _bind(names):
    for name in names:
        res, args = _PROTOTYPES[name]
        try:
            fn = getattr(lib, name)
        except AttributeError:
            raise ImportError(
                "nxr %s (the Python package): %s (libnxr %s) lacks %s"
                % (_build.VERSION, path, lib.nxr_version_string().decode(), name)
            ) from None
        fn.restype, fn.argtypes = res, args


def version():
    """(major, minor, patch) of the loaded library."""
    v = lib.nxr_version()
    return (v >> 16) & 0xFF, (v >> 8) & 0xFF, v & 0xFF


def _check_version():
    want = tuple(int(p) for p in _build.VERSION.split("."))
    have = version()
    # Same major (the ABI), and a library at least as new as the package's
    # release within it (minor releases only add).
    if have[0] != want[0] or have[:2] < want[:2]:
        raise ImportError(
            "nxr %s (the Python package) needs libnxr %d.%d or a later %d.x; %s is %s"
            % (_build.VERSION, want[0], want[1], want[0], path,
               lib.nxr_version_string().decode())
        )


lib, path = _load()
_bind(_VERSION_PROTOTYPES)
_check_version()
_bind(n for n in _PROTOTYPES if n not in _VERSION_PROTOTYPES)

_libc = ctypes.CDLL(None)
_libc.free.argtypes = [c_void_p]
_libc.free.restype = None
free = _libc.free


# ---- the calls that create something --------------------------------------
# The 1.0 API (docs/api-1.0.md): the object first, the out-parameter last,
# and one error channel, the calling thread's nxr_last_error(). Each returns
# the status and what was created (NULL on failure).


def runtime_create(opts):
    rt = c_void_p()
    rc = lib.nxr_runtime_create(ctypes.byref(opts), ctypes.byref(rt))
    return rc, rt


def ctx_create(rt, domain_id):
    ctx = c_void_p()
    rc = lib.nxr_ctx_create(rt, domain_id, ctypes.byref(ctx))
    return rc, ctx


def ctx_create_here(rt):
    ctx = c_void_p()
    rc = lib.nxr_ctx_create_here(rt, ctypes.byref(ctx))
    return rc, ctx


def last_error():
    """The detail of the calling thread's last failed nxr call (thread-local
    in the library: read it on the thread that made the call, before its
    next nxr call)."""
    return lib.nxr_last_error().decode(errors="replace")
