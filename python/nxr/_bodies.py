"""Which bodies the calling thread is running, and what waits until it runs
none.

A body is a parallel_for range or a submitted task: Python called back by
nxr on one of the participants of a context's operation (the calling
thread or a worker). The binding's callbacks record here, per thread, the
context whose operation runs each body they enter. From that:

- a call on that context from the body belongs to the operation running
  it (docs/contracts.md, "Who drives a context"): it runs in place,
  without the context's lock, whichever participant runs the body;
- what would wait for the operation running it is refused before the
  library sees it: closing that context (the thread rule: EBUSY), closing
  a runtime, waiting for a job (NXR_EREENTRANT, as nxr answers);
- what must run outside every body but is started by the collector inside
  one (the last array of a closed runtime dropped in a body, and with it
  nxr_runtime_destroy) is kept here and run by the next binding call that
  returns outside every body on any thread (later(), run_later()); what is
  still kept at exit runs then.

Python reaches a body only through the binding's callbacks, so "no body
recorded" is "outside every body" for nxr too.
"""
import atexit
import threading

_tls = threading.local()
_later = []  # (fn, args): started inside a body, to run outside every body
_later_lock = threading.Lock()


def _stack():
    s = getattr(_tls, "stack", None)
    if s is None:
        s = _tls.stack = []
    return s


class running:
    """with running(token): the calling thread runs a body of the operation of
    the context whose token this is."""

    def __init__(self, token):
        self.token = token

    def __enter__(self):
        _stack().append(self.token)

    def __exit__(self, *exc):
        _stack().pop()
        return False


def inside():
    """Whether the calling thread is inside a body (of any context)."""
    return bool(getattr(_tls, "stack", None))


def inside_of(token):
    """Whether the calling thread runs a body of that context's operation."""
    return token in getattr(_tls, "stack", ())


def later(fn, *args):
    """Runs fn(*args) now when outside every body, else once outside."""
    if inside():
        with _later_lock:
            _later.append((fn, args))
    else:
        fn(*args)


def run_later():
    """Runs what later() kept, when the calling thread is outside every body
    (else leaves it for the next caller outside)."""
    if not _later or inside():
        return
    with _later_lock:
        todo = list(_later)
        del _later[:]
    for fn, args in todo:
        fn(*args)


atexit.register(run_later)
