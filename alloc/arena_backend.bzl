"""Which arena back end //alloc compiles (alloc/internal/arena.h): one setting.

  --//alloc:arena=jemalloc  arena.c, a private jemalloc arena per domain (the
                            default: the static library, the tests, the tools);
  --//alloc:arena=mmap      arena_mmap.c, one extent per allocation, with no
                            allocator in between: --config=tsan sets it
                            (.bazelrc), and libnxr.so is always linked with it
                            (dist/defs.bzl's transition), because Debian's
                            jemalloc uses initial-exec TLS, which a dlopen()ed
                            library cannot have.
"""

ARENA_BACKENDS = ["jemalloc", "mmap"]

def _arena_backend_impl(ctx):
    if ctx.build_setting_value not in ARENA_BACKENDS:
        fail("--%s=%s: the arena back end is one of %s" %
             (ctx.label, ctx.build_setting_value, ARENA_BACKENDS))
    return []

arena_backend = rule(
    implementation = _arena_backend_impl,
    build_setting = config.string(flag = True),
)

def _arena_transition_impl(settings, attr):
    _ignore = settings
    return {"//alloc:arena": attr.arena}

_arena_transition = transition(
    implementation = _arena_transition_impl,
    inputs = [],
    outputs = ["//alloc:arena"],
)

def _with_arena_impl(ctx):
    binary = ctx.attr.binary[0]
    src = binary[DefaultInfo].files_to_run.executable
    out = ctx.actions.declare_file(ctx.label.name)

    # A copy under this target's name, and the binary's runfiles without the
    # binary itself: its runfiles path is the untransitioned binary's too,
    # and a target carrying both (bench:alloc_arenas) would get only one.
    ctx.actions.run_shell(
        inputs = [src],
        outputs = [out],
        command = 'cp "$1" "$2" && chmod +x "$2"',
        arguments = [src.path, out.path],
        mnemonic = "NxrWithArena",
    )
    data = [f for f in binary[DefaultInfo].default_runfiles.files.to_list() if f != src]
    return [DefaultInfo(executable = out, runfiles = ctx.runfiles(files = data))]

# with_arena(name, binary, arena): `binary` built with --//alloc:arena=arena,
# beside the default build of it: e.g. bench/alloc with the arena libnxr.so
# ships (arena_mmap.c) next to the one libnxr.a ships.
with_arena = rule(
    implementation = _with_arena_impl,
    executable = True,
    attrs = {
        "binary": attr.label(mandatory = True, executable = True, cfg = _arena_transition),
        "arena": attr.string(mandatory = True, values = ARENA_BACKENDS),
        "_allowlist_function_transition": attr.label(
            default = "@bazel_tools//tools/allowlists/function_transition_allowlist",
        ),
    },
)

# with_arena_test(name, test, arena): the same, for a test (its runfiles
# and data come along): the suite runs a package's tests against the arena
# libnxr.so ships as well as against the default one.
with_arena_test = rule(
    implementation = _with_arena_impl,
    test = True,
    attrs = {
        "binary": attr.label(mandatory = True, executable = True, cfg = _arena_transition),
        "arena": attr.string(mandatory = True, values = ARENA_BACKENDS),
        "_allowlist_function_transition": attr.label(
            default = "@bazel_tools//tools/allowlists/function_transition_allowlist",
        ),
    },
)
