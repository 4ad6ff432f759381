/*
 * `nxr demo [--model llama]` flags (see the usage below): parsed strictly,
 * every value checked before anything starts; a bad one is one line naming
 * the flag and exit status 2 (the parsers of demo_cmd.c). The run is
 * service/llama_demo.h.
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "service/llama_demo.h"
#include "tools/demo_cmd.h"

const char nxr_tool_demo_llama_usage[] =
    "           --model llama (the default) flags:\n"
    "             --size S         15m (default), 110m or 1b (dim 2048, 22 layers, GQA)\n"
    "             --dim N --hidden N --layers N --heads N --kv-heads N --vocab N\n"
    "                              explicit dimensions (each overrides the size's)\n"
    "             --weights W      f32 (default), bf16 or int8 (8-bit blocks of 32, one scale "
    "each)\n"
    "             --clients N      sequences in flight (default 8)\n"
    "             --sequences N    sequences per path (default 16)\n"
    "             --prompt MIN-MAX prompt tokens (default 16-256)\n"
    "             --gen MIN-MAX    tokens asked for (default 16-128)\n"
    "             --kv-mib N       KV cache budget per domain (default 256)\n"
    "             --step-tokens N  rows per step, decode + prefill chunks (default 64)\n"
    "             --domains SPEC   NXR_DOMAINS grammar (default: one per node)\n"
    "             --seed N         weights and prompts (default 1)\n"
    "             --machine S      seconds measuring the read bandwidth (default 1; 0: none)\n"
    "             --metrics-port N, --metrics-hold K  as the MLP demo's (above)\n"
    "             --plot FILE.svg  also write each path's inter-token latency and time to first\n"
    "                              token (CDFs) and nxr's tokens/s per step over time to FILE\n"
    "             --time-budget S  seconds of serving before rounds are cut short (default 40;\n"
    "                              0: none, every path serves every sequence)\n"
    "             --span           also serve each sequence over EVERY domain at once: the\n"
    "                              weights sharded by node (each domain computes its rows of\n"
    "                              every product), the KV cache on the first domain; its\n"
    "                              inter-token latency against one domain's (nxr's) and its\n"
    "                              tokens must be theirs. f32 weights only (with --weights\n"
    "                              bf16/int8: exit 2). On one domain it serves, with a note:\n"
    "                              the span is then that domain. With --no-compare: nxr and\n"
    "                              span only. (--model mlp keeps its own --span, above.)\n"
    "             --no-compare     serve batched only (no peers)\n"
    "             --json           one JSON object instead of the table\n";

/* The explicit dimensions: flag, field of the shape. */
struct dim_flag {
    const char *flag;
    size_t offset;
};

static const struct dim_flag dims[] = {
    {"--dim", offsetof(struct svc_llama_shape, dim)},
    {"--hidden", offsetof(struct svc_llama_shape, hidden)},
    {"--layers", offsetof(struct svc_llama_shape, layers)},
    {"--heads", offsetof(struct svc_llama_shape, heads)},
    {"--kv-heads", offsetof(struct svc_llama_shape, kv_heads)},
    {"--vocab", offsetof(struct svc_llama_shape, vocab)},
};

static int llama_run(const void *config, void *result, bool *bad_input)
{
    return svc_llama_demo_run(config, result, bad_input);
}

static const char *llama_error(const void *result)
{
    return ((const struct svc_llama_demo_result *)result)->error;
}

static void llama_report(const void *result, bool json)
{
    if (json)
        svc_llama_report_json(stdout, result);
    else
        svc_llama_report_text(stdout, result);
}

int nxr_tool_demo_llama(int argc, char **argv)
{
    struct svc_llama_demo_config c;
    svc_llama_demo_config_init(&c);
    size_t explicit_dims[sizeof dims / sizeof dims[0]] = {0};
    bool json = false;
    long metrics_port = -1, metrics_hold = 0;
    static const char *const plain[] = {"--json", "--no-compare", "--span"};
    static const char *const valued[] = {
        "--size",   "--weights",      "--clients",     "--sequences", "--prompt",   "--gen",
        "--kv-mib", "--step-tokens",  "--domains",     "--seed",      "--machine",  "--time-budget",
        "--dim",    "--hidden",       "--layers",      "--heads",     "--kv-heads", "--vocab",
        "--plot",   "--metrics-port", "--metrics-hold"};
    for (int i = 0; i < argc; i++) {
        struct nxr_tool_flag fl;
        int frc = nxr_tool_demo_flag(argc, argv, &i, plain, sizeof plain / sizeof plain[0], valued,
                                     sizeof valued / sizeof valued[0], &fl);
        if (frc != 0)
            return frc;
        const char *flag = fl.name, *value = fl.value;
        if (value == NULL) {
            if (strcmp(flag, "--json") == 0)
                json = true;
            else if (strcmp(flag, "--span") == 0)
                c.span = true;
            else
                c.compare = false;
            continue;
        }
        uint64_t x = 0;
        int rc = nxr_tool_demo_metrics_flag(flag, value, &metrics_port, &metrics_hold);
        if (rc != 1) {
            /* --metrics-port or --metrics-hold: read (0) or refused (2) */
        } else if ((rc = 0) == 0 && strcmp(flag, "--plot") == 0) {
            rc = nxr_tool_demo_plot(flag, value, &c.plot_path);
        } else if (strcmp(flag, "--size") == 0) {
            if (strcmp(value, "short") == 0 || svc_llama_shape_named(value, &c.shape) != 0)
                return nxr_tool_demo_bad(flag, "'%s' is not 15m, 110m or 1b", value);
        } else if (strcmp(flag, "--weights") == 0) {
            const int f = svc_llama_format_named(value);
            if (f < 0)
                return nxr_tool_demo_bad(flag, "'%s' is not f32, bf16 or int8", value);
            c.format = (enum svc_llama_format)f;
        } else if (strcmp(flag, "--clients") == 0) {
            if ((rc = nxr_tool_demo_size(flag, value, 1, 256, &x)) == 0)
                c.clients = (size_t)x;
        } else if (strcmp(flag, "--sequences") == 0) {
            if ((rc = nxr_tool_demo_size(flag, value, 1, 1000000, &x)) == 0)
                c.sequences = (size_t)x;
        } else if (strcmp(flag, "--prompt") == 0) {
            rc = nxr_tool_demo_range(flag, value, 1, 8192, &c.prompt_min, &c.prompt_max);
        } else if (strcmp(flag, "--gen") == 0) {
            rc = nxr_tool_demo_range(flag, value, 1, 8192, &c.gen_min, &c.gen_max);
        } else if (strcmp(flag, "--kv-mib") == 0) {
            if ((rc = nxr_tool_demo_size(flag, value, 1, 1 << 20, &x)) == 0)
                c.kv_mib = (size_t)x;
        } else if (strcmp(flag, "--step-tokens") == 0) {
            if ((rc = nxr_tool_demo_size(flag, value, 1, 4096, &x)) == 0)
                c.step_tokens = (size_t)x;
        } else if (strcmp(flag, "--seed") == 0) {
            if ((rc = nxr_tool_demo_size(flag, value, 0, UINT64_MAX, &x)) == 0)
                c.seed = x;
        } else if (strcmp(flag, "--machine") == 0) {
            if ((rc = nxr_tool_demo_size(flag, value, 0, 600, &x)) == 0)
                c.machine_s = (double)x;
        } else if (strcmp(flag, "--time-budget") == 0) {
            if ((rc = nxr_tool_demo_size(flag, value, 0, 86400, &x)) == 0)
                c.time_budget_s = (double)x;
        } else if (strcmp(flag, "--domains") == 0) {
            if (value[0] == '\0')
                return nxr_tool_demo_bad(flag, "%sis empty", "");
            c.domains = value;
        } else {
            for (size_t k = 0; k < sizeof dims / sizeof dims[0]; k++)
                if (strcmp(flag, dims[k].flag) == 0 &&
                    (rc = nxr_tool_demo_size(flag, value, 1, 1 << 20, &x)) == 0)
                    explicit_dims[k] = (size_t)x;
        }
        if (rc != 0)
            return rc;
    }
    /* Explicit dimensions override the size's, whatever the order given. */
    for (size_t k = 0; k < sizeof dims / sizeof dims[0]; k++)
        if (explicit_dims[k] != 0) {
            *(size_t *)((char *)&c.shape + dims[k].offset) = explicit_dims[k];
            c.shape.name = "custom";
        }
    if (c.clients > c.step_tokens)
        return nxr_tool_demo_bad("--clients",
                                 "%s is above --step-tokens (every active sequence "
                                 "decodes each step)",
                                 "the count");
    if (c.span && c.format != SVC_LLAMA_F32)
        return nxr_tool_demo_bad("--span",
                                 "shards f32 weights only (%s has no sharded form); drop "
                                 "--weights or --span",
                                 svc_llama_format_name(c.format));
    const char *problem = svc_llama_shape_problem(&c.shape);
    if (problem != NULL)
        return nxr_tool_demo_bad("--dim/--heads", "%s", problem);
    static const struct nxr_tool_demo_kind llama = {
        .result_size = sizeof(struct svc_llama_demo_result),
        .run = llama_run,
        .error = llama_error,
        .report = llama_report,
    };
    return nxr_tool_demo_run(&llama, &c, &c.runtime_hook, &c.runtime_hook_arg, metrics_port,
                             metrics_hold, json);
}
