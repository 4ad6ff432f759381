"""Rules that turn nxr's cc_libraries into what a host outside Bazel links.

Bazel's own outputs are not that: a cc_library's archive holds only its own
package's objects, its per-package .so leaves the hidden nxr__* symbols of
its siblings undefined, and a cc_binary(linkshared) links nothing that no
object asks for. These rules take the PIC objects of every library in the
dependency graph (so object basenames may collide across packages) and
link them once:
  lib<name>.so  soname lib<name>.so.<NXR_VERSION_MAJOR>, exports only the
                public API (-fvisibility=hidden + NXR_API, plus a version
                script NAME_<major> { nxr_*; local: * }), bundled archives
                (nxr's private jemalloc) hidden, no undefined symbol left
                (-z defs): link_shared.sh;
  lib<name>.a   one relocatable object in which every hidden symbol and
                every symbol of a bundled archive is local: a host linking it
                sees only the public nxr_* API (link_static.sh).
Both scripts refuse an output that exports anything else.

The two are linked from two builds of the same graph. lib<name>.a keeps the
arena back end of the build (jemalloc by default, alloc/arena.c).
lib<name>.so is always linked from the graph built with
--//alloc:arena=mmap (alloc/arena_mmap.c, no jemalloc): Debian's
libjemalloc_pic.a uses initial-exec TLS (2.9 KiB of it), which makes a
shared library that holds it fail to dlopen() ("cannot allocate memory in
static TLS block") in any process that did not reserve that much static TLS
at start-up -- ctypes, plug-in hosts. The README gives what it costs.
"""

load("@bazel_tools//tools/cpp:toolchain_utils.bzl", "find_cpp_toolchain")

NxrDistInfo = provider(
    doc = "A packaged nxr library: what it covers and its shared object.",
    fields = {
        "owners_shared": "depset of the labels whose objects the shared library holds",
        "owners_static": "depset of the labels whose objects the static library holds",
        "shared": "File: the shared library",
    },
)

def _shared_arena_impl(settings, attr):
    _ignore = (settings, attr)
    return {"//alloc:arena": "mmap"}

# The graph libnxr.so is linked from: the arena without jemalloc (see above).
_shared_arena = transition(
    implementation = _shared_arena_impl,
    inputs = [],
    outputs = ["//alloc:arena"],
)

def _collect(deps, skip):
    """Objects, bundled archives and link flags of deps' graph, minus skip."""
    objects = []
    archives = []
    flags = []
    owners = []
    for dep in deps:
        for li in dep[CcInfo].linking_context.linker_inputs.to_list():
            if li.owner in skip or li.owner in owners:
                continue
            owners.append(li.owner)
            for f in li.user_link_flags:
                if f not in flags:
                    flags.append(f)
            for lib in li.libraries:
                if lib.pic_objects:
                    objects += lib.pic_objects
                elif lib.objects:
                    fail("%s has no PIC objects; a shared library needs them" % li.owner)
                elif lib.pic_static_library or lib.static_library:
                    # A prebuilt archive (cc_import): linked in, kept private.
                    archives.append(lib.pic_static_library or lib.static_library)
    return objects, archives, flags, owners

def _nxr_dist_library_impl(ctx):
    cc_toolchain = find_cpp_toolchain(ctx)
    skip_shared = {}
    skip_static = {}
    link_inputs = []
    extra_shared = []
    if ctx.attr.link_against:
        other = ctx.attr.link_against[NxrDistInfo]
        for owner in other.owners_shared.to_list():
            skip_shared[owner] = True
        for owner in other.owners_static.to_list():
            skip_static[owner] = True
        extra_shared.append(other.shared.path)
        link_inputs.append(other.shared)
    objects, archives, flags, owners = _collect(ctx.attr.shared_deps, skip_shared)
    s_objects, s_archives, _, s_owners = _collect(ctx.attr.deps, skip_static)
    if not objects or not s_objects:
        fail("no objects to package")

    name = ctx.attr.library
    shared = ctx.actions.declare_file("lib%s.so" % name)
    static = ctx.actions.declare_file("lib%s.a" % name)
    version = ctx.file.version
    tools = cc_toolchain.all_files

    # User link options (--linkopt: the sanitizer configs) apply here as in
    # any Bazel link.
    user_flags = ctx.fragments.cpp.linkopts
    args = ctx.actions.args()
    args.add(shared)
    args.add("lib%s.so" % name)
    args.add(name.upper())
    args.add(version)
    args.add(cc_toolchain.compiler_executable)
    args.add(cc_toolchain.nm_executable)
    args.add("--")
    args.add_all(objects)
    args.add_all(archives)
    args.add_all(extra_shared)
    args.add_all(flags)
    args.add_all(user_flags)
    ctx.actions.run(
        executable = ctx.executable._link_shared,
        arguments = [args],
        inputs = depset(objects + archives + link_inputs + [version], transitive = [tools]),
        outputs = [shared],
        use_default_shell_env = True,
        mnemonic = "NxrLinkShared",
        progress_message = "Linking lib%s.so (nxr's public API only)" % name,
    )

    sargs = ctx.actions.args()
    sargs.add(static)
    sargs.add(cc_toolchain.ld_executable)
    sargs.add(cc_toolchain.objcopy_executable)
    sargs.add(cc_toolchain.nm_executable)
    sargs.add(cc_toolchain.ar_executable)
    sargs.add("--")
    sargs.add_all(s_objects)
    sargs.add("--archives")
    sargs.add_all(s_archives)
    ctx.actions.run(
        executable = ctx.executable._link_static,
        arguments = [sargs],
        inputs = depset(s_objects + s_archives, transitive = [tools]),
        outputs = [static],
        use_default_shell_env = True,
        mnemonic = "NxrLinkStatic",
        progress_message = "Linking lib%s.a (one object, internals local)" % name,
    )
    return [
        DefaultInfo(
            files = depset([shared, static]),
            runfiles = ctx.runfiles(files = [shared, static]),
        ),
        NxrDistInfo(
            owners_shared = depset(owners),
            owners_static = depset(s_owners),
            shared = shared,
        ),
    ]

_nxr_dist_library = rule(
    implementation = _nxr_dist_library_impl,
    doc = "lib<library>.so and lib<library>.a from the objects of deps' graph.",
    attrs = {
        "deps": attr.label_list(providers = [CcInfo], mandatory = True),
        "shared_deps": attr.label_list(
            providers = [CcInfo],
            mandatory = True,
            cfg = _shared_arena,
            doc = "deps again, built with the shared library's arena back end",
        ),
        "_allowlist_function_transition": attr.label(
            default = "@bazel_tools//tools/allowlists/function_transition_allowlist",
        ),
        "library": attr.string(mandatory = True, doc = "nxr for libnxr.so"),
        "link_against": attr.label(
            providers = [NxrDistInfo],
            doc = "A packaged library this one links dynamically; its objects are left out.",
        ),
        "version": attr.label(allow_single_file = True, mandatory = True),
        "_link_shared": attr.label(
            default = ":link_shared.sh",
            executable = True,
            cfg = "exec",
            allow_single_file = True,
        ),
        "_link_static": attr.label(
            default = ":link_static.sh",
            executable = True,
            cfg = "exec",
            allow_single_file = True,
        ),
        "_cc_toolchain": attr.label(default = Label("@bazel_tools//tools/cpp:current_cc_toolchain")),
    },
    fragments = ["cpp"],
    toolchains = ["@bazel_tools//tools/cpp:toolchain_type"],
)

def nxr_dist_library(name, deps, **kwargs):
    """lib<library>.so (from deps built with the mmap arena) and lib<library>.a (from deps)."""
    _nxr_dist_library(name = name, deps = deps, shared_deps = deps, **kwargs)

def _nxr_dist_headers_impl(ctx):
    outs = {}
    for f in ctx.files.srcs:
        if f.basename in outs:
            fail("two public headers are named %s; installed flat, they would collide" % f.basename)
        outs[f.basename] = ctx.actions.declare_file("%s/%s" % (ctx.attr.dir, f.basename))
    args = ctx.actions.args()
    args.add(outs.values()[0].dirname)
    args.add_all(ctx.files.srcs)
    args.add("--known")
    args.add_all([f.basename for f in ctx.files.known])
    ctx.actions.run(
        executable = ctx.executable._rewrite,
        arguments = [args],
        inputs = ctx.files.srcs,
        outputs = outs.values(),
        use_default_shell_env = True,
        mnemonic = "NxrHeaders",
        progress_message = "Staging nxr's public headers for <nxr/...>",
    )
    return [DefaultInfo(
        files = depset(outs.values()),
        runfiles = ctx.runfiles(files = outs.values()),
    )]

nxr_dist_headers = rule(
    implementation = _nxr_dist_headers_impl,
    doc = "The public headers, flat in one directory, including each other by basename.",
    attrs = {
        "srcs": attr.label_list(allow_files = [".h"], mandatory = True),
        "known": attr.label_list(
            allow_files = [".h"],
            doc = "Headers staged by another target that srcs may include.",
        ),
        "dir": attr.string(mandatory = True),
        "_rewrite": attr.label(
            default = ":rewrite_headers.sh",
            executable = True,
            cfg = "exec",
            allow_single_file = True,
        ),
    },
)

def _nxr_consumer_flags_impl(ctx):
    out = ctx.actions.declare_file(ctx.label.name + ".txt")
    ctx.actions.write(out, "".join([f + "\n" for f in ctx.fragments.cpp.linkopts]))
    return [DefaultInfo(files = depset([out]), runfiles = ctx.runfiles(files = [out]))]

# The --linkopt values of this build (the sanitizer configs' runtimes): a
# program that links the packaged libraries must use them too.
nxr_consumer_flags = rule(
    implementation = _nxr_consumer_flags_impl,
    fragments = ["cpp"],
)
