"""Loading: the installed package finds the installed library by itself in
a fresh interpreter (no NXR_LIBRARY, no LD_LIBRARY_PATH, no GLIBC_TUNABLES),
checks its version at import, and says clearly what went wrong otherwise."""
import os
import shutil
import tempfile
import unittest

import nxr
import support


class Load(unittest.TestCase):
    def test_fresh_interpreter_finds_the_installed_library(self):
        rc, out = support.fresh(
            "import nxr, os; print(nxr.__file__); print(os.path.realpath(nxr.library_path)); "
            "print(nxr.library_version, nxr.__version__)"
        )
        self.assertEqual(rc, 0, out)
        pkg, lib, versions = out.splitlines()[:3]
        pydir = support.installed_pydir()
        self.assertTrue(pkg.startswith(pydir + os.sep), "imported %s, not the install in %s" % (pkg, pydir))
        # The library next to the package's prefix: PREFIX/lib/python3/
        # dist-packages/nxr -> a libnxr.so.<major> under PREFIX.
        prefix = os.path.dirname(os.path.dirname(os.path.dirname(pydir)))
        self.assertTrue(lib.startswith(os.path.realpath(prefix) + os.sep), "%s not under %s" % (lib, prefix))
        major = nxr.__version__.split(".")[0]
        self.assertTrue(os.path.basename(lib).startswith("libnxr.so.%s." % major), lib)
        lib_version, py_version = versions.split()
        self.assertEqual(lib_version.split(".")[0], py_version.split(".")[0])

    def test_nxr_library_overrides_and_a_missing_one_is_named(self):
        rc, out = support.fresh("import nxr", env={"NXR_LIBRARY": "/nonexistent/libnxr.so.1"})
        self.assertNotEqual(rc, 0)
        self.assertIn("ImportError", out)
        self.assertIn("/nonexistent/libnxr.so.1 (NXR_LIBRARY)", out)
        rc, out = support.fresh("import nxr; print(nxr.library_path)",
                                env={"NXR_LIBRARY": nxr.library_path})
        self.assertEqual((rc, out.strip()), (0, nxr.library_path), out)

    def test_a_version_mismatch_fails_the_import_clearly(self):
        # The installed package, copied, claiming the next major: the
        # library it loads is then too old for it.
        tmp = tempfile.mkdtemp()
        try:
            src = os.path.dirname(nxr.__file__)
            dst = os.path.join(tmp, "nxr")
            shutil.copytree(src, dst)
            build = os.path.join(dst, "_build.py")
            with open(build) as f:
                text = f.read()
            major = int(nxr.__version__.split(".")[0])
            text = text.replace('VERSION = "%s"' % nxr.__version__, 'VERSION = "%d.0.0"' % (major + 1))
            lib = os.path.realpath(nxr.library_path)
            text = text.replace("LIBRARY = ", "LIBRARY = %r or " % lib)
            with open(build, "w") as f:
                f.write(text)
            rc, out = support.fresh("import nxr", extra_path=tmp)
            self.assertNotEqual(rc, 0, out)
            self.assertIn("ImportError: nxr %d.0.0 (the Python package) needs libnxr %d.0" % (major + 1, major + 1), out)
            self.assertIn(nxr.library_version, out)
        finally:
            shutil.rmtree(tmp)

    def stub_library(self, tmp, version):
        """A shared object with only what an older libnxr exports for the
        version check (nxr_version, nxr_version_string, nxr_strerror), built
        here with cc."""
        import subprocess

        major, minor, patch = version
        src = os.path.join(tmp, "stub.c")
        with open(src, "w") as f:
            f.write("unsigned nxr_version(void) { return %du << 16 | %du << 8 | %du; }\n"
                    "const char *nxr_version_string(void) { return \"%d.%d.%d\"; }\n"
                    "const char *nxr_strerror(int s) { (void)s; return \"stub\"; }\n"
                    % (major, minor, patch, major, minor, patch))
        so = os.path.join(tmp, "libnxr_stub.so")
        subprocess.run(["cc", "-shared", "-fPIC", "-o", so, src], check=True)
        return so

    def test_an_older_library_fails_the_import_naming_both_versions(self):
        # Its symbols are not the package's: the version is checked before
        # any other prototype is bound (else: AttributeError, undefined
        # symbol nxr_last_error).
        tmp = tempfile.mkdtemp()
        try:
            so = self.stub_library(tmp, (0, 9, 3))
            rc, out = support.fresh("import nxr", env={"NXR_LIBRARY": so})
            self.assertNotEqual(rc, 0, out)
            self.assertIn("ImportError: nxr %s (the Python package) needs libnxr" % nxr.__version__, out)
            self.assertIn("0.9.3", out)
            self.assertNotIn("AttributeError", out)
        finally:
            shutil.rmtree(tmp)

    def test_a_library_without_a_symbol_the_package_needs_fails_the_import_naming_it(self):
        tmp = tempfile.mkdtemp()
        try:
            so = self.stub_library(tmp, tuple(int(p) for p in nxr.__version__.split(".")))
            rc, out = support.fresh("import nxr", env={"NXR_LIBRARY": so})
            self.assertNotEqual(rc, 0, out)
            self.assertIn("ImportError", out)
            self.assertIn("nxr_last_error", out)
            self.assertIn(so, out)
            self.assertNotIn("AttributeError", out)
        finally:
            shutil.rmtree(tmp)

    def test_without_numpy_runtimes_work_and_arrays_say_why_not(self):
        code = (
            "import sys; sys.modules['numpy'] = None\n"
            "import nxr\n"
            "with nxr.Runtime(ignore_env=True) as rt:\n"
            "    ctx = rt.context(rt.domains[0].id)\n"
            "    print(len(rt.info()['domains']) == len(rt.domains))\n"
            "    try:\n"
            "        ctx.empty(4)\n"
            "    except nxr.Error as e:\n"
            "        print(e.status == nxr.NXR_EUNSUPPORTED, 'numpy' in str(e))\n"
        )
        rc, out = support.fresh(code)
        self.assertEqual(rc, 0, out)
        self.assertEqual(out.split(), ["True", "True", "True"], out)


if __name__ == "__main__":
    unittest.main()
