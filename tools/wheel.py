#!/usr/bin/env python3
"""tools/wheel.py ROOT LIBDIR VERSION OUTDIR: the pip wheel of the binding.

Builds nxr-VERSION-py3-none-PLATFORM.whl in OUTDIR from an install staged in
ROOT (tools/package.sh stages one): the Python package (python/nxr, as the
install put it) with its own copy of libnxr.so.VERSION beside it, and a
_build.py that names that copy, so the package loads it first (before
ctypes.util.find_library; NXR_LIBRARY still wins). The wheel is
platform-specific (one architecture's library) but not manylinux: libnxr
needs the system's hwloc, libnuma and OpenBLAS (Debian: libhwloc15,
libnuma1, libopenblas0), which it does not carry. A wheel is a zip with a
dist-info directory (PEP 427); written here with the standard library, so
building one needs no pip, setuptools or wheel package. Prints the path.
"""
import base64
import hashlib
import os
import sys
import sysconfig
import zipfile


def record_line(name, data):
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return "%s,sha256=%s,%d" % (name, digest, len(data))


def main(argv):
    if len(argv) != 5:
        sys.stderr.write(__doc__)
        return 2
    root, libdir, version, out = argv[1:]
    pkgdir = os.path.join(root, "usr/lib/python3/dist-packages/nxr")
    library = os.path.join(root, libdir.lstrip("/"), "libnxr.so." + version)
    for p in (pkgdir, library):
        if not os.path.exists(p):
            sys.stderr.write("wheel.py: %s is not in the staged install\n" % p)
            return 1
    platform = sysconfig.get_platform().replace("-", "_").replace(".", "_")
    tag = "py3-none-" + platform
    dist_info = "nxr-%s.dist-info" % version
    files = []  # (name in the wheel, bytes, mode)
    for name in sorted(os.listdir(pkgdir)):
        if not name.endswith(".py") or name == "_build.py":
            continue
        with open(os.path.join(pkgdir, name), "rb") as f:
            files.append(("nxr/" + name, f.read(), 0o644))
    lib_name = "libnxr.so." + version  # as in a prefix: the release's file
    files.append((
        "nxr/_build.py",
        ('"""Written by tools/wheel.py: the release this wheel carries, and its\n'
         'own copy of the library, beside this file."""\n'
         'VERSION = "%s"\nLIBRARY = "%s"\n'
         '# A wheel carries no headers or nxr.pc (tests that need them skip).\n'
         'WHEEL = True\n' % (version, lib_name)).encode(),
        0o644,
    ))
    with open(library, "rb") as f:
        files.append(("nxr/" + lib_name, f.read(), 0o755))
    metadata = (
        "Metadata-Version: 2.1\n"
        "Name: nxr\n"
        "Version: %s\n"
        "Summary: NUMA-aware executor runtime (Python binding, with its libnxr.so)\n"
        "Requires-Python: >=3.7\n"
        "Requires-External: libhwloc15\n"
        "Requires-External: libnuma1\n"
        "Requires-External: libopenblas0\n"
        "\n"
        "ctypes over libnxr.so: runtimes, contexts, node-local arrays and kernels.\n"
        "numpy is optional (without it: runtimes, contexts, bind).\n" % version
    ).encode()
    wheel = ("Wheel-Version: 1.0\nGenerator: nxr tools/wheel.py\n"
             "Root-Is-Purelib: false\nTag: %s\n" % tag).encode()
    files.append((dist_info + "/METADATA", metadata, 0o644))
    files.append((dist_info + "/WHEEL", wheel, 0o644))
    record = "".join(record_line(n, d) + "\n" for n, d, _ in files)
    record += dist_info + "/RECORD,,\n"
    files.append((dist_info + "/RECORD", record.encode(), 0o644))
    os.makedirs(out, exist_ok=True)
    path = os.path.join(out, "nxr-%s-%s.whl" % (version, tag))
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        for name, data, mode in files:
            info = zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0))
            info.external_attr = (0o100000 | mode) << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            z.writestr(info, data)
    print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
