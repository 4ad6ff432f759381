/*
 * nxr: the command-line face of the runtime.
 *
 *     nxr demo [flags]      serve a language model with continuous batching, one
 *                           context per domain (tools/demo_llama_cmd.c); with
 *                           --model mlp the MLP service against a flat team and
 *                           OpenMP (tools/demo_cmd.c)
 *     nxr info [--json | --prometheus]
 *                           describe the runtime nxr builds on this machine
 *                           (--prometheus: its counters' metrics page)
 *     nxr top [--once [--json]] [--interval MS]
 *                           every nxr runtime of this user on the machine,
 *                           live (tools/top_cmd.c)
 *
 * Exit status: 0 on success, 1 when the runtime cannot be created or the
 * run fails (the message says why), 2 on a usage error.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/nxr.h"
#include "tools/demo_cmd.h"
#include "tools/top_cmd.h"

static int usage(void)
{
    fprintf(stderr,
            "usage: nxr demo [flags] | nxr info [--json | --prometheus] | nxr top [flags]\n%s%s"
            "  info     describe topology and domains (NXR_TOPOLOGY, NXR_DOMAINS apply)\n"
            "           --json: one JSON object instead of text\n"
            "           --prometheus: the live counters as a Prometheus metrics page\n%s",
            nxr_tool_demo_usage, nxr_tool_demo_llama_usage, nxr_tool_top_usage);
    return 2;
}

static int cmd_info(int argc, char **argv)
{
    enum nxr_describe_format format = NXR_DESCRIBE_TEXT;
    for (int i = 0; i < argc; i++) {
        if (strcmp(argv[i], "--json") == 0)
            format = NXR_DESCRIBE_JSON;
        else if (strcmp(argv[i], "--prometheus") == 0)
            format = NXR_DESCRIBE_PROMETHEUS;
        else
            return usage();
    }
    struct nxr_runtime_opts opts;
    nxr_runtime_opts_init(&opts);
    nxr_runtime_t *rt;
    int rc = nxr_runtime_create(&opts, &rt);
    if (rc != 0) {
        const char *err = nxr_last_error();
        fprintf(stderr, "nxr: %s%s%s\n", nxr_strerror(rc), err[0] ? ": " : "", err);
        return 1;
    }
    char *text;
    rc = nxr_runtime_describe(rt, format, &text);
    if (rc == 0) {
        fputs(text, stdout);
        free(text);
    } else {
        fprintf(stderr, "nxr: describe: %s\n", nxr_strerror(rc));
    }
    nxr_runtime_destroy(rt);
    return rc == 0 ? 0 : 1;
}

int main(int argc, char **argv)
{
    if (argc >= 2 && strcmp(argv[1], "demo") == 0)
        return nxr_tool_demo(argc - 2, argv + 2);
    if (argc >= 2 && strcmp(argv[1], "info") == 0)
        return cmd_info(argc - 2, argv + 2);
    if (argc >= 2 && strcmp(argv[1], "top") == 0)
        return nxr_tool_top(argc - 2, argv + 2);
    return usage();
}
