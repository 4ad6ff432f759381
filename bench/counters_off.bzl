"""A binary rebuilt with nxr's live counters compiled out (NXR_COUNTERS=0,
executor/internal/counters.h), for bench/forkjoin's counter-cost row: the
same program against its own counters in the same run. The whole
dependency tree is built once more in that configuration."""

def _counters_off_impl(settings, attr):
    return {"//command_line_option:copt": settings["//command_line_option:copt"] + ["-DNXR_COUNTERS=0"]}

_counters_off = transition(
    implementation = _counters_off_impl,
    inputs = ["//command_line_option:copt"],
    outputs = ["//command_line_option:copt"],
)

def _counters_off_binary_impl(ctx):
    src = ctx.attr.binary[0][DefaultInfo].files_to_run.executable
    out = ctx.actions.declare_file(ctx.label.name)
    ctx.actions.run_shell(
        inputs = [src],
        outputs = [out],
        command = "cp '%s' '%s'" % (src.path, out.path),
        progress_message = "Copying %s without counters" % src.short_path,
    )
    return [DefaultInfo(executable = out, files = depset([out]))]

counters_off_binary = rule(
    implementation = _counters_off_binary_impl,
    attrs = {
        "binary": attr.label(cfg = _counters_off, executable = True),
        "_allowlist_function_transition": attr.label(
            default = "@bazel_tools//tools/allowlists/function_transition_allowlist",
        ),
    },
    executable = True,
)
