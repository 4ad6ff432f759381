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

# The layer of every package, bottom up: the one table of the layer order.
# tools/layering_check.sh reads it from here (every Bazel edge and quoted
# include must go to the same or a lower layer) and checks the layer table of
# docs/architecture.md against it.
NXR_LAYERS = {
    # System libraries and sanitizer files.
    "third_party": 0,
    "third_party/jemalloc": 0,
    "tools/sanitizers": 0,
    # The library, bottom up.
    "base": 1,
    "domains": 2,
    "executor": 3,
    "alloc": 4,
    "kernels": 5,
    "runtime": 6,
    # The root package (//:nxr = //runtime, //:public_headers) and the
    # fixtures on the library.
    "root": 6,
    "tests/support": 6,
    # Host code on the installed API (and the host pool), the Python binding.
    "examples": 7,
    "python": 7,
    # An application of the public API.
    "service": 8,
    "dist": 9,
    "tools": 9,
    "bench": 9,
    # Tests drive their unit through any library layer and use the
    # example-side host pool, never the service; the service's tests and the
    # soak use the service; tests of the programs and the install sit on top.
    "tests/base": 7,
    "tests/domains": 7,
    "tests/executor": 7,
    "tests/alloc": 7,
    "tests/kernels": 7,
    "tests/runtime": 7,
    "tests/fuzz": 7,
    "tests/service": 8,
    "tests/reliability": 8,
    "tests/dist": 9,
    "tests/tools": 9,
    "tests/mpi": 9,
    "tests/bench": 9,
    "tests": 9,
}

# The library packages, bottom up: layers 1-6 but the root and the fixtures,
# which sit on the library (tools/layering_check.sh derives it the same
# way). A package's internals are visible to the library packages after it.
NXR_LIBRARY_LAYERS = [
    p
    for p, layer in NXR_LAYERS.items()
    if layer >= 1 and layer <= 6 and p not in ["root", "tests/support"]
]

def _internal_visibility(package):
    """Who may depend on a package's internals: the library packages above
    it, the tests (white-box, and often through a higher layer: tests of the
    executor drive it through the runtime) and the benchmarks."""
    above = []
    if package in NXR_LIBRARY_LAYERS:
        above = NXR_LIBRARY_LAYERS[NXR_LIBRARY_LAYERS.index(package) + 1:]
    return ["//%s:__pkg__" % p for p in [package] + above] + [
        "//bench:__pkg__",
        "//tests:__subpackages__",
    ]

def nxr_library(
        name,
        srcs = [],
        hdrs = [],
        internal_hdrs = [],
        textual_hdrs = [],
        deps = [],
        copts = [],
        visibility = ["//visibility:public"],
        **kwargs):
    """A library of nxr itself, as two targets, with the project's flags.

    :<name>_internal  the implementation (srcs) and every header: internal_hdrs
                      (the package's internal/ headers) and hdrs. Private to
                      the library packages above this one (NXR_LIBRARY_LAYERS),
                      the tests and bench/; what an upper package's own
                      internals depend on.
    :<name>           the public headers (hdrs: the package's nxr*.h), linked
                      with the implementation; visible to `visibility`
                      (public unless the BUILD says otherwise). What the
                      packages on the public API only (service, tools,
                      examples, dist) depend on.

    Bazel's visibility checks who names which target; which headers a file
    includes is checked by tools/layering_check.sh (gcc has no layering_check
    feature, so the internal headers still reach a dependant's sandbox
    through the implementation).
    """
    native.cc_library(
        name = name + "_internal",
        srcs = srcs,
        hdrs = hdrs + internal_hdrs,
        textual_hdrs = textual_hdrs,
        copts = NXR_COPTS + copts,
        deps = deps,
        visibility = _internal_visibility(native.package_name()),
        **kwargs
    )
    native.cc_library(
        name = name,
        hdrs = hdrs,
        deps = [":" + name + "_internal"],
        visibility = visibility,
    )

def nxr_private_library(name, copts = [], **kwargs):
    """A part of one package's library (one vector ISA's kernels, say), with
    the project's flags and visible to that package only."""
    native.cc_library(
        name = name,
        copts = NXR_COPTS + copts,
        visibility = ["//visibility:private"],
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
        # Criterion finds its cases in a section nothing references: with
        # -c opt Bazel links with --gc-sections, which dropped them all and
        # left binaries that ran zero cases and passed.
        linkopts = kwargs.pop("linkopts", []) + ["-Wl,--no-gc-sections"],
        **kwargs
    )

def nxr_binary(name, copts = [], **kwargs):
    """A program (the nxr tool, a benchmark, an example)."""
    native.cc_binary(
        name = name,
        copts = NXR_TEST_COPTS + copts,
        **kwargs
    )
