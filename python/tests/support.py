"""What the binding's tests share: the leak probes (threads of this
process, buffers outstanding in a runtime's pools), CPU ids from the
allowed set, and a watchdog that turns a hang into a failure.

The tests run against the INSTALLED package and library (.ci/run stage 8:
tests/dist/scripts_check.sh sets PYTHONPATH to PREFIX/lib/python3/
dist-packages and nothing else); they never import the source tree.
"""
import faulthandler
import gc
import os
import sys

import nxr

# Every wait in these tests is bounded by this; a test that would hang
# (a GIL held across a foreign call, a lost wakeup) dumps every thread's
# stack and exits the process with a failure instead.
WATCHDOG_S = 120


def start_watchdog():
    faulthandler.dump_traceback_later(WATCHDOG_S, exit=True)


def threads():
    return len(os.listdir("/proc/self/task"))


def outstanding(rt):
    return sum(d["pool"]["outstanding"] for d in rt.info()["domains"])


def cpus():
    return sorted(os.sched_getaffinity(0))


def runtime(**kw):
    """A runtime of this machine's domains that reads no environment (no
    peer registry, no NXR_* from the caller)."""
    kw.setdefault("ignore_env", True)
    return nxr.Runtime(**kw)


def collect():
    # Arrays die by reference count; gc only for cycles a failed test left.
    gc.collect()


def installed_pydir():
    return os.path.dirname(os.path.dirname(os.path.abspath(nxr.__file__)))


def fresh(code, env=None, extra_path=None):
    """Runs code in a fresh interpreter (this one's executable) with only
    PYTHONPATH set for it, returns (exit status, stdout+stderr)."""
    import subprocess

    e = {k: v for k, v in os.environ.items() if not k.startswith(("NXR_", "PYTHON", "GLIBC_TUNABLES", "LD_"))}
    e["PYTHONPATH"] = extra_path or installed_pydir()
    e.update(env or {})
    p = subprocess.run([sys.executable, "-c", code], env=e, capture_output=True, text=True,
                       timeout=WATCHDOG_S)
    return p.returncode, p.stdout + p.stderr
