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
    "             --prefill-tokens N  prompt rows a step takes while sequences decode (default\n"
    "                              12; 0: as many as --step-tokens leaves): small keeps every\n"
    "                              step about as long, so the inter-token latency's p99 stays\n"
    "                              near its p50; prompts take every row when nobody decodes\n"
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

/* The explicit dimensions' fields of the shape, in the order of their
 * flags in the table (--dim, --hidden, --layers, --heads, --kv-heads,
 * --vocab). */
static const size_t dims[] = {
    offsetof(struct svc_llama_shape, dim),      offsetof(struct svc_llama_shape, hidden),
    offsetof(struct svc_llama_shape, layers),   offsetof(struct svc_llama_shape, heads),
    offsetof(struct svc_llama_shape, kv_heads), offsetof(struct svc_llama_shape, vocab),
};

static int size_flag(const char *flag, const char *value, void *to)
{
    if (strcmp(value, "short") == 0 || svc_llama_shape_named(value, to) != 0)
        return nxr_tool_demo_bad(flag, "'%s' is not 15m, 110m or 1b", value);
    return 0;
}

static int weights_flag(const char *flag, const char *value, void *to)
{
    const int f = svc_llama_format_named(value);
    if (f < 0)
        return nxr_tool_demo_bad(flag, "'%s' is not f32, bf16 or int8", value);
    *(enum svc_llama_format *)to = (enum svc_llama_format)f;
    return 0;
}

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
    const struct nxr_tool_flag_spec flags[] = {
        NXR_TOOL_FLAG("--json", NXR_TOOL_FLAG_SET, &json),
        NXR_TOOL_FLAG("--no-compare", NXR_TOOL_FLAG_CLEAR, &c.compare),
        NXR_TOOL_FLAG("--span", NXR_TOOL_FLAG_SET, &c.span),
        NXR_TOOL_FLAG_PARSE("--size", &c.shape, size_flag),
        NXR_TOOL_FLAG_PARSE("--weights", &c.format, weights_flag),
        NXR_TOOL_FLAG_NUM("--clients", NXR_TOOL_FLAG_SIZE, &c.clients, 1, 256),
        NXR_TOOL_FLAG_NUM("--sequences", NXR_TOOL_FLAG_SIZE, &c.sequences, 1, 1000000),
        NXR_TOOL_FLAG_MIN_MAX("--prompt", &c.prompt_min, &c.prompt_max, 1, 8192),
        NXR_TOOL_FLAG_MIN_MAX("--gen", &c.gen_min, &c.gen_max, 1, 8192),
        NXR_TOOL_FLAG_NUM("--kv-mib", NXR_TOOL_FLAG_SIZE, &c.kv_mib, 1, 1 << 20),
        NXR_TOOL_FLAG_NUM("--step-tokens", NXR_TOOL_FLAG_SIZE, &c.step_tokens, 1, 4096),
        NXR_TOOL_FLAG_NUM("--prefill-tokens", NXR_TOOL_FLAG_SIZE, &c.prefill_tokens, 0, 4096),
        NXR_TOOL_FLAG("--domains", NXR_TOOL_FLAG_TEXT, &c.domains),
        NXR_TOOL_FLAG_NUM("--seed", NXR_TOOL_FLAG_U64, &c.seed, 0, UINT64_MAX),
        NXR_TOOL_FLAG_NUM("--machine", NXR_TOOL_FLAG_SECONDS, &c.machine_s, 0, 600),
        NXR_TOOL_FLAG_NUM("--time-budget", NXR_TOOL_FLAG_SECONDS, &c.time_budget_s, 0, 86400),
        NXR_TOOL_FLAG_PARSE("--plot", &c.plot_path, nxr_tool_demo_plot),
        NXR_TOOL_METRICS_FLAGS(&metrics_port, &metrics_hold),
        /* The explicit dimensions, in the order of dims[]. */
        NXR_TOOL_FLAG_NUM("--dim", NXR_TOOL_FLAG_SIZE, &explicit_dims[0], 1, 1 << 20),
        NXR_TOOL_FLAG_NUM("--hidden", NXR_TOOL_FLAG_SIZE, &explicit_dims[1], 1, 1 << 20),
        NXR_TOOL_FLAG_NUM("--layers", NXR_TOOL_FLAG_SIZE, &explicit_dims[2], 1, 1 << 20),
        NXR_TOOL_FLAG_NUM("--heads", NXR_TOOL_FLAG_SIZE, &explicit_dims[3], 1, 1 << 20),
        NXR_TOOL_FLAG_NUM("--kv-heads", NXR_TOOL_FLAG_SIZE, &explicit_dims[4], 1, 1 << 20),
        NXR_TOOL_FLAG_NUM("--vocab", NXR_TOOL_FLAG_SIZE, &explicit_dims[5], 1, 1 << 20),
    };
    int rc = nxr_tool_flags_parse(argc, argv, flags, sizeof flags / sizeof flags[0]);
    if (rc != 0)
        return rc;
    /* Explicit dimensions override the size's, whatever the order given. */
    for (size_t k = 0; k < sizeof dims / sizeof dims[0]; k++)
        if (explicit_dims[k] != 0) {
            *(size_t *)((char *)&c.shape + dims[k]) = explicit_dims[k];
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
