"""nxr.Error and the status codes (base/nxr_status.h).

Every failure the binding reports is an nxr.Error: `status` is the C status
(a negative errno such as nxr.EINVAL, or one of nxr's codes such as
nxr.EOVERLAP), `name` its symbol ("EINVAL", "NXR_EOVERLAP"), `detail` the
library's detail for the failed call (which argument, which rule) or the
binding's own when it refused the call before reaching C (wrong dtype, a
non-contiguous array, shapes that do not agree, a closed runtime, a context
another thread is driving).
"""
import errno

from nxr import _lib

# nxr's own codes, as in base/nxr_status.h (test_layout.py compares them
# with the installed header).
NXR_CODES = {
    "NXR_EREENTRANT": -1001,
    "NXR_EOVERLAP": -1002,
    "NXR_EPLACEMENT": -1003,
    "NXR_EEMPTYSET": -1004,
    "NXR_EDISALLOWED": -1005,
    "NXR_EDUPID": -1006,
    "NXR_EBUDGET": -1007,
    "NXR_ESYNTAX": -1008,
    "NXR_ETOPOLOGY": -1009,
    "NXR_ENODOMAIN": -1010,
    "NXR_EUNSUPPORTED": -1011,
    "NXR_EADMISSION": -1012,
    "NXR_EOUTSTANDING": -1013,
    "NXR_EBROKEN": -1014,
    "NXR_EFPENV": -1015,
    "NXR_EEXECUTOR": -1016,
    "NXR_EPROVIDER": -1017,
    "NXR_EMIXED": -1018,
    "NXR_EFORKED": -1019,
}
# The errnos nxr's calls return, negated as the C API returns them.
ERRNOS = {name: -getattr(errno, name) for name in ("EINVAL", "ENOMEM", "EBUSY", "EAGAIN", "ENOENT")}


def status_name(status):
    for table in (NXR_CODES, ERRNOS):
        for name, value in table.items():
            if value == status:
                return name
    if status < 0 and -status in errno.errorcode:
        return errno.errorcode[-status]
    return str(status)


class Error(Exception):
    """A failed nxr call: .status (the C status), .name, .detail."""

    def __init__(self, status, detail, call=None):
        self.status = status
        self.name = status_name(status)
        self.detail = detail
        self.call = call
        text = _lib.lib.nxr_strerror(status).decode(errors="replace")
        where = "%s: " % call if call and not detail.startswith(call) else ""
        named = text if text.startswith(self.name) else "%s: %s" % (self.name, text)
        super().__init__("%s%s (%s)" % (where, detail or text, named))


def check(rc, call):
    """Raises Error for a failed C call, with the library's detail (the
    calling thread's nxr_last_error, read before any other nxr call)."""
    if rc != 0:
        raise Error(rc, _lib.last_error(), call)


def invalid(call, detail):
    """The binding's own refusal of an argument (the library never saw it)."""
    return Error(ERRNOS["EINVAL"], "%s: %s" % (call, detail), call)
