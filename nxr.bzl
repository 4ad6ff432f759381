"""Compiler flags and rule macros for nxr: the one place where they are defined."""

NXR_COPTS = [
    "-std=c11",
    "-D_GNU_SOURCE",
    "-Wall",
    "-Wextra",
    "-Werror",
    "-Wshadow",
    "-Wstrict-prototypes",
    "-Wmissing-prototypes",
    "-fvisibility=hidden",
    "-O2",
    "-g",
]

# Tests and benchmarks are looser: Criterion's macros trip -Wmissing-prototypes.
NXR_TEST_COPTS = [
    "-std=c11",
    "-D_GNU_SOURCE",
    "-Wall",
    "-Wextra",
    "-Werror",
    "-O2",
    "-g",
]

def nxr_library(name, copts = [], **kwargs):
    """A library of nxr itself: project flags, private unless it says otherwise."""
    native.cc_library(
        name = name,
        copts = NXR_COPTS + copts,
        **kwargs
    )

def nxr_test(name, srcs, deps = [], size = "small", copts = [], data = [], **kwargs):
    """A Criterion test binary (tests/<pkg>/<unit>_test.c)."""
    native.cc_test(
        name = name,
        srcs = srcs,
        # The sanitizer configs point LSAN_OPTIONS / TSAN_OPTIONS at these.
        data = data + [
            "//tools/sanitizers:lsan.supp",
            "//tools/sanitizers:tsan.supp",
        ],
        copts = NXR_TEST_COPTS + copts,
        deps = deps + ["//third_party:criterion"],
        size = size,
        # Static: nxr builds with -fvisibility=hidden, so its internal symbols
        # (which white-box tests call) exist only inside a static link.
        linkstatic = True,
        **kwargs
    )

def nxr_binary(name, copts = [], **kwargs):
    """A program (the nxr tool, a benchmark, an example)."""
    native.cc_binary(
        name = name,
        copts = NXR_TEST_COPTS + copts,
        **kwargs
    )
