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

def nxr_test(name, srcs, deps = [], size = "small", timeout = "moderate", copts = [], linkstatic = True, **kwargs):
    """A Criterion test binary (tests/<pkg>/<unit>_test.c).

    Linked statically against nxr's own libraries: they are built with
    -fvisibility=hidden, so the per-library shared objects of Bazel's dynamic
    test mode cannot resolve each other's nxr__ internals.
    """
    native.cc_test(
        name = name,
        srcs = srcs,
        copts = NXR_TEST_COPTS + copts,
        deps = deps + ["//third_party:criterion"],
        size = size,
        timeout = timeout,
        linkstatic = linkstatic,
        **kwargs
    )

def nxr_binary(name, copts = [], **kwargs):
    """A program (the nxr tool, a benchmark, an example)."""
    native.cc_binary(
        name = name,
        copts = NXR_TEST_COPTS + copts,
        **kwargs
    )
