"""The ctypes mirrors in nxr/_lib.py and the status codes in nxr/_errors.py
against the installed headers: a C program compiled against them prints
every mirrored field's offset, every struct's size and every nxr status
code, and each must equal what the binding assumes. A header change the
binding did not follow fails here, not as a corrupted call."""
import os
import shutil
import subprocess
import tempfile
import unittest
import ctypes

import nxr
from nxr import _lib
from nxr._errors import NXR_CODES


def includedir():
    """PREFIX/include of the install the loaded library belongs to."""
    libdir = os.path.dirname(nxr.library_path)
    pc = os.path.join(libdir, "pkgconfig")
    out = subprocess.run(["pkg-config", "--cflags", "nxr"], env=dict(os.environ, PKG_CONFIG_PATH=pc),
                         capture_output=True, text=True)
    return out.stdout.split() if out.returncode == 0 else None


@unittest.skipIf(shutil.which("cc") is None or shutil.which("pkg-config") is None,
                 "needs cc and pkg-config (tools/setup.sh installs both)")
class Layout(unittest.TestCase):
    def test_mirrors_and_codes_match_the_installed_headers(self):
        if getattr(nxr._build, "WHEEL", False):
            self.skipTest("a pip wheel carries no headers: checked against a prefix install")
        cflags = includedir()
        self.assertIsNotNone(cflags, "no nxr.pc beside %s" % nxr.library_path)
        lines = ['#include <stddef.h>', '#include <stdio.h>', '#include <nxr/nxr.h>', 'int main(void) {']
        expect = []
        for mirror, ctype in _lib.MIRRORS:
            lines.append('printf("%%zu\\n", sizeof(%s));' % ctype)
            expect.append(("sizeof " + ctype, ctypes.sizeof(mirror)))
            for name, *_ in mirror._fields_:
                lines.append('printf("%%zu\\n", offsetof(%s, %s));' % (ctype, name))
                expect.append(("%s.%s" % (ctype, name), getattr(mirror, name).offset))
        for name, value in NXR_CODES.items():
            lines.append('printf("%%d\\n", (int)%s);' % name)
            expect.append((name, value))
        for name, value in (("NXR_ERANGE_LAST", min(NXR_CODES.values())),
                            ("NXR_DESCRIBE_JSON", _lib.DESCRIBE_JSON),
                            ("NXR_ACTIVATION_SILU", _lib.ACTIVATION_SILU),
                            ("NXR_ACTIVATION_GELU_TANH", _lib.ACTIVATION_GELU_TANH),
                            ("NXR_BINARY_MUL", _lib.BINARY_MUL),
                            ("NXR_UNARY_GELU_TANH", _lib.UNARY_GELU_TANH),
                            ("NXR_MEM_BOUND", _lib.MEM_BOUND),
                            ("NXR_FAMILY_COUNT", _lib.FAMILY_COUNT)):
            lines.append('printf("%%d\\n", (int)%s);' % name)
            expect.append((name, value))
        lines += ["return 0;", "}"]
        tmp = tempfile.mkdtemp()
        try:
            src, exe = os.path.join(tmp, "layout.c"), os.path.join(tmp, "layout")
            with open(src, "w") as f:
                f.write("\n".join(lines) + "\n")
            cc = subprocess.run(["cc", "-std=c11", src, "-o", exe] + cflags, capture_output=True, text=True)
            self.assertEqual(cc.returncode, 0, cc.stderr)
            got = subprocess.run([exe], capture_output=True, text=True, check=True).stdout.split()
        finally:
            shutil.rmtree(tmp)
        self.assertEqual(len(got), len(expect))
        wrong = ["%s: C %s, binding %s" % (what, c, py) for (what, py), c in zip(expect, got) if int(c) != py]
        self.assertEqual(wrong, [])


if __name__ == "__main__":
    unittest.main()
