#!/usr/bin/env python3
"""Every kernel of the kernel table is complete: each place that adding a
kernel touches (docs/architecture.md, "Adding a kernel") has it.

For each row K(name, family, table, PARAMS) of kernels/internal/kernel_table.h
(NXR__KERNELS and NXR__KERNELS_OWN):
  - kernels/nxr_provider.h: the op `name` in struct nxr_<table>_ops, taking
    the row's parameters after `self, call`;
  - runtime/nxr_ctx_kernels.h: NXR_API int nxr_<name>(ctx, the parameters);
  - runtime/kernel_wrappers.c: its written definition, same parameters;
  - kernels/bundle.c: nxr__bundle_<name>(bundle, call, the parameters),
    written out;
  - kernels/native_provider.c: `.<name> =` in the family's native ops table;
  - python/nxr/_lib.py: the ctypes prototype, one argument per parameter and
    the context; python/nxr/_context.py: a method that calls it (unless
    NOT_IN_PYTHON says why not);
  - tests/runtime/error_channel_test.c: its FALLIBLE row;
  - docs/guide.md: the kernel named in the user guide.
And docs/architecture.md's "Adding a kernel" names every one of those files,
so the list a reader follows and the one checked here are the same.

Parameters are compared by type and name, whitespace aside: the rule of the
table is that the public call and the op take the same list.

Run from the workspace root (Bazel runs it in its runfiles tree); prints one
line per missing piece and exits 1 when there is one.
"""
import re
import sys

TABLE = "kernels/internal/kernel_table.h"
OPS = "kernels/nxr_provider.h"
DECLS = "runtime/nxr_ctx_kernels.h"
WRAPPERS = "runtime/kernel_wrappers.c"
BUNDLE = "kernels/bundle.c"
NATIVE = "kernels/native_provider.c"
PY_LIB = "python/nxr/_lib.py"
PY_CONTEXT = "python/nxr/_context.py"
ERROR_CHANNEL = "tests/runtime/error_channel_test.c"
GUIDE = "docs/guide.md"
ARCHITECTURE = "docs/architecture.md"

# Kernels the Python binding leaves out, and why.
NOT_IN_PYTHON = {
    "sgemm_batch": "not bound yet: a NumPy caller stacks the items into one nxr_sgemm",
}


def read(path):
    with open(path) as f:
        return f.read()


def strip_comments(text):
    return re.sub(r"/\*.*?\*/", " ", text, flags=re.S)


def param(text):
    """'const float *x' -> ('const float *', 'x'), whitespace normalized."""
    text = " ".join(text.split())
    m = re.fullmatch(r"(.*?[\s*])(\w+)", text)
    if not m:
        return (text, "")
    kind = re.sub(r"\s*\*\s*", " *", m.group(1).strip()).strip()
    return (kind, m.group(2))


def params(text):
    return [param(p) for p in text.split(",") if p.strip()]


def rows(table):
    """[(name, family, ops table, [(type, name), ...]), ...] from the table."""
    lists = {}
    for m in re.finditer(r"#define (NXR__\w+_PARAMS)\(P\)((?:.*\\\n)*.*)", table):
        body = m.group(2).replace("\\\n", " ")
        lists[m.group(1)] = [param(" ".join(p)) for p in re.findall(r"P\(([^,]+),\s*(\w+)\)", body)]
    out = []
    for macro in ("NXR__KERNELS", "NXR__KERNELS_OWN"):
        m = re.search(r"#define %s\(K\)((?:.*\\\n)*.*)" % macro, table)
        if not m:
            sys.exit("%s: no %s" % (TABLE, macro))
        for name, family, ops, plist in re.findall(
            r"K\((\w+),\s*(\w+),\s*(\w+),\s*(\w+)\)", m.group(1)
        ):
            if plist not in lists:
                sys.exit("%s: row %s names %s, which is not defined" % (TABLE, name, plist))
            out.append((name, family, ops, lists[plist]))
    return out


def section(markdown, heading):
    m = re.search(r"(?ms)^#+ %s\n(.*?)(?=^#)" % re.escape(heading), markdown + "\n#")
    return m.group(1) if m else None


def main():
    table = strip_comments(read(TABLE))
    ops = strip_comments(read(OPS))
    decls = strip_comments(read(DECLS))
    wrappers = strip_comments(read(WRAPPERS))
    bundle = strip_comments(read(BUNDLE))
    native = strip_comments(read(NATIVE))
    py_lib, py_context = read(PY_LIB), read(PY_CONTEXT)
    error_channel, guide = read(ERROR_CHANNEL), read(GUIDE)
    missing = []

    def same(where, name, found, want):
        if found is None:
            missing.append("%s: no %s" % (where, name))
        elif params(found) != want:
            missing.append(
                "%s: %s takes (%s), the table's row (%s)"
                % (where, name, " ".join(found.split()), ", ".join("%s%s%s" % (t, "" if t.endswith("*") else " ", n) for t, n in want))
            )

    kernels = rows(table)
    if len(kernels) < 14:
        missing.append("%s: %d rows, fewer than the 1.0 kernels" % (TABLE, len(kernels)))
    for name, family, table_name, want in kernels:
        public = "nxr_" + name
        m = re.search(r"struct nxr_%s_ops \{(.*?)\};" % table_name, ops, re.S)
        op = m and re.search(
            r"\(\*%s\)\(\s*void \*self,\s*const struct nxr_kernel_call \*call,([^;]*)\);" % name,
            m.group(1),
        )
        same(OPS, "op %s in struct nxr_%s_ops" % (name, table_name), op and op.group(1), want)

        decl = re.search(r"NXR_API int %s\(\s*nxr_ctx_t \*ctx,([^;]*)\);" % public, decls)
        same(DECLS, "NXR_API declaration of " + public, decl and decl.group(1), want)

        defn = re.search(r"(?m)^int %s\(nxr_ctx_t \*ctx,([^)]*)\)\s*\{" % public, wrappers)
        same(WRAPPERS, "written definition of " + public, defn and defn.group(1), want)

        disp = re.search(
            r"(?m)^int nxr__bundle_%s\(const nxr_provider_bundle_t \*\w+,\s*"
            r"const struct nxr_kernel_call \*call,([^)]*)\)\s*\{" % name,
            bundle,
        )
        same(BUNDLE, "written dispatch nxr__bundle_" + name, disp and disp.group(1), want)

        m = re.search(r"struct nxr_%s_ops \w+ = \{(.*?)\};" % table_name, native, re.S)
        if not m or not re.search(r"\.%s\s*=" % name, m.group(1)):
            missing.append("%s: no .%s in the native %s ops table" % (NATIVE, name, table_name))

        if name in NOT_IN_PYTHON:
            if '"%s"' % public in py_lib:
                missing.append("%s: %s is bound; drop it from NOT_IN_PYTHON" % (PY_LIB, public))
        else:
            proto = re.search(r'"%s":\s*\(\s*\w+,\s*\[(.*?)\]' % public, py_lib, re.S)
            if not proto:
                missing.append("%s: no prototype for %s" % (PY_LIB, public))
            elif len([a for a in proto.group(1).split(",") if a.strip()]) != len(want) + 1:
                missing.append(
                    "%s: %s's prototype does not have %d arguments" % (PY_LIB, public, len(want) + 1)
                )
            if not re.search(r"_lib\.lib\.%s\b" % public, py_context):
                missing.append("%s: no method calls %s" % (PY_CONTEXT, public))

        if "FALLIBLE(%s)" % public not in error_channel:
            missing.append("%s: no FALLIBLE(%s) row" % (ERROR_CHANNEL, public))
        if "`%s`" % public not in guide:
            missing.append("%s: %s is not named" % (GUIDE, public))

    adding = section(read(ARCHITECTURE), "Adding a kernel")
    if adding is None:
        missing.append("%s: no section 'Adding a kernel'" % ARCHITECTURE)
    else:
        for path in (OPS, TABLE, DECLS, WRAPPERS, BUNDLE, NATIVE, PY_LIB, PY_CONTEXT,
                     ERROR_CHANNEL, GUIDE):
            if path not in adding:
                missing.append("%s: 'Adding a kernel' does not name %s" % (ARCHITECTURE, path))

    for line in missing:
        print("kernel_table_test: " + line)
    if missing:
        print("kernel_table_test: FAILED: %d missing" % len(missing))
        return 1
    print("kernel_table_test: ok: %d kernels, each in every place" % len(kernels))
    return 0


if __name__ == "__main__":
    sys.exit(main())
