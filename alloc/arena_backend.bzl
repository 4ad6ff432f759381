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
