"""A Python service loading libnxr.so as a new user would: ctypes.CDLL.

usage: python3 ctypes_host.py PATH [plain|numpy-before|numpy-after]
  plain         CDLL(PATH) in a fresh interpreter;
  numpy-before  import numpy (and run a matmul, which starts its BLAS
                threads) first, then CDLL(PATH);
  numpy-after   CDLL(PATH) first, then import numpy and run the matmul.
Then, in each case: nxr_version_string, a runtime created and destroyed
(the runtime's threads come and go: counted in /proc/self/task), and the
library closed with dlclose (gone from /proc/self/maps; in plain and
numpy-before the process has the threads it had before CDLL). Exits 1 with
a FAILED line when a check does not hold, 3 when numpy is not installed
for this interpreter (the caller reports a skip), else prints
"ctypes_host: ok, ...". Meant to run with no environment variable set for
it (no GLIBC_TUNABLES, no LD_PRELOAD): the caller clears them.
"""
import ctypes
import os
import sys


def threads():
    return len(os.listdir("/proc/self/task"))


def mapped(path):
    real = os.path.realpath(path)
    with open("/proc/self/maps") as maps:
        return any(line.rstrip().endswith(real) for line in maps)


def fail(what):
    print("ctypes_host: FAILED: %s" % what)
    sys.exit(1)


def use_numpy():
    try:
        import numpy
    except ImportError:
        print("ctypes_host: numpy is not installed for %s" % sys.executable)
        sys.exit(3)
    a = numpy.arange(256 * 256, dtype=numpy.float64).reshape(256, 256) / 65536.0
    b = a @ a.T
    if abs(b[3, 5] - float(a[3] @ a[5])) > 1e-9:
        fail("numpy's matmul disagrees with its own dot product")
    return numpy.__version__


def main():
    if len(sys.argv) not in (2, 3):
        sys.exit(__doc__)
    path = sys.argv[1]
    mode = sys.argv[2] if len(sys.argv) == 3 else "plain"
    if mode not in ("plain", "numpy-before", "numpy-after"):
        sys.exit("unknown mode %r" % mode)
    for var in ("GLIBC_TUNABLES", "LD_PRELOAD"):
        if var in os.environ:
            fail("%s is set; this check is about a process with none" % var)
    numpy_version = use_numpy() if mode == "numpy-before" else None
    before = threads()
    try:
        lib = ctypes.CDLL(path)  # RTLD_LOCAL, RTLD_NOW is not asked for: ctypes' default
    except OSError as e:
        fail("ctypes.CDLL: %s" % e)
    if mode == "numpy-after":
        numpy_version = use_numpy()
    lib.nxr_version_string.restype = ctypes.c_char_p
    lib.nxr_runtime_create.argtypes = [ctypes.c_void_p, ctypes.POINTER(ctypes.c_void_p)]
    lib.nxr_runtime_create.restype = ctypes.c_int
    lib.nxr_runtime_destroy.argtypes = [ctypes.c_void_p]
    lib.nxr_runtime_destroy.restype = None
    version = lib.nxr_version_string().decode()
    idle = threads()
    rt = ctypes.c_void_p()
    rc = lib.nxr_runtime_create(None, ctypes.byref(rt))
    if rc != 0 or not rt:
        fail("nxr_runtime_create returned %d" % rc)
    running = threads()
    lib.nxr_runtime_destroy(rt)
    destroyed = threads()
    if running <= idle:
        fail("the runtime started no thread (%d before, %d running)" % (idle, running))
    if destroyed != idle:
        fail("nxr_runtime_destroy left threads: %d before create, %d after destroy" % (idle, destroyed))
    handle = lib._handle
    del lib
    import _ctypes

    _ctypes.dlclose(handle)
    if mapped(path):
        fail("%s is still mapped after dlclose" % path)
    after = threads()
    if mode != "numpy-after" and after != before:
        fail("threads left after dlclose: %d before CDLL, %d after" % (before, after))
    print(
        "ctypes_host: ok, %s: ctypes.CDLL of nxr %s%s in %s, runtime created and destroyed "
        "(threads %d idle, %d running, %d destroyed), dlclose leaves %d threads (%d before CDLL)"
        % (
            mode,
            version,
            " with numpy %s" % numpy_version if numpy_version else "",
            sys.executable,
            idle,
            running,
            destroyed,
            after,
            before,
        )
    )


if __name__ == "__main__":
    main()
