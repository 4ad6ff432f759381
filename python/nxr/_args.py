"""The binding's checks of the counts, sizes and ids it passes to C.

ctypes converts a Python int to size_t or int without a word: -1 becomes
2**64 - 1 tasks, 2**32 becomes domain 0. So every such argument is checked
here first, and a value out of range is nxr.Error(EINVAL) naming the
argument, before the library sees it. A count or size is an int from 0 to
sys.maxsize (the largest length a Python object can have); an id is a C
int. A bool is refused where a number is meant (True tasks is a slip).
"""
import operator
import sys

from nxr._errors import invalid

INT_MIN, INT_MAX = -(2 ** 31), 2 ** 31 - 1


def _int(call, name, value):
    if isinstance(value, bool):
        raise invalid(call, "%s: expected an int, got bool %r" % (name, value))
    try:
        return operator.index(value)
    except TypeError:
        raise invalid(call, "%s: expected an int, got %s" % (name, type(value).__name__)) from None


def count(call, name, value):
    """value as an int in [0, sys.maxsize]: a count or a size for a size_t."""
    v = _int(call, name, value)
    if v < 0 or v > sys.maxsize:
        raise invalid(call, "%s = %d: out of range [0, %d]" % (name, v, sys.maxsize))
    return v


def c_int(call, name, value, low=INT_MIN):
    """value as an int in [low, INT_MAX]: an id (or a count) for a C int."""
    v = _int(call, name, value)
    if v < low or v > INT_MAX:
        raise invalid(call, "%s = %d: out of range [%d, %d]" % (name, v, low, INT_MAX))
    return v


def shape(call, value, itemsize):
    """(shape tuple, element count) of an array shape (an int or a sequence
    of ints) whose bytes a size_t and numpy can hold."""
    dims = (value,) if isinstance(value, int) and not isinstance(value, bool) else value
    try:
        dims = tuple(operator.index(s) for s in dims)
    except (TypeError, ValueError):
        raise invalid(call, "shape must be an int or a tuple of ints, got %r" % (value,)) from None
    if any(s < 0 for s in dims):
        raise invalid(call, "shape %r has a negative dimension" % (dims,))
    n = 1
    for s in dims:
        n *= s
    if n * itemsize > sys.maxsize:
        raise invalid(call, "shape %r: %d bytes, more than an array can hold (%d)"
                      % (dims, n * itemsize, sys.maxsize))
    return dims, n
