/*
 * `nxr demo` flags (see usage below): parsed strictly, every value checked
 * before anything starts; a bad one is a one-line error naming the flag
 * and exit status 2. The progress bar goes to stderr, only when it is a
 * terminal.
 */
#include "tools/demo_cmd.h"
#include "tools/demo_metrics.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "service/compete.h"
#include "service/demo.h"
#include "service/report.h"

const char nxr_tool_demo_usage[] =
    "  demo     serve a language model (the default, --model llama: flags below) or, with\n"
    "           --model mlp, run an embedded MLP inference service, one context per domain,\n"
    "           against a flat team and OpenMP on the same requests; --model mlp flags:\n"
    "             --requests N     requests per path (default 4000)\n"
    "             --clients N      concurrent closed-loop clients (default 4)\n"
    "             --batch MIN-MAX  rows per request, log-uniform (default 1-16)\n"
    "             --hidden N       model width (default 256; ffn = 4 x hidden)\n"
    "             --layers N       MLP blocks (default 8)\n"
    "             --domains SPEC   NXR_DOMAINS grammar, e.g. '0:0-3;1:4-7' (default: one per "
    "node)\n"
    "             --executor E     nxr (default), openmp or pool: run on an attached executor\n"
    "             --seed N         weights and requests (default 1)\n"
    "             --max-batch N    rows one forward pass coalesces from the requests waiting\n"
    "                              at a domain (default 64; 1: each request alone)\n"
    "             --weights W      packed (once per domain; the default with --executor nxr)\n"
    "                              or plain (packed by the GEMM on every call)\n"
    "             --time-budget S  seconds of serving before rounds are cut short (default 25;\n"
    "                              0: none, every path serves every request)\n"
    "             --machine S      seconds measuring the GEMM peak and the read bandwidth\n"
    "                              before serving (default 1; 0: not measured, no limit lines)\n"
    "             --compete N      N busy processes pinned to the domains' CPUs (highest first)\n"
    "                              for the run, killed after: a noisy neighbour (default 0)\n"
    "             --no-compare     serve with nxr only\n"
    "             --span           also serve each request across every domain, weights\n"
    "                              sharded (the latency mode), beside the per-domain one\n"
    "             --plot FILE.svg  also write each path's latency distribution (a CDF) to FILE\n"
    "             --metrics-port N the live counters as a Prometheus page on 127.0.0.1:N while\n"
    "                              the demo runs (0: a free port; both demos)\n"
    "             --metrics-hold K after the run, serve the last counters until K requests\n"
    "                              were answered (scripts, tests; needs --metrics-port)\n"
    "             --json           one JSON object instead of the table\n";

int nxr_tool_demo_metrics_start(struct nxr_tool_metrics *m, long port, long hold)
{
    if (hold > 0 && port < 0)
        return nxr_tool_demo_bad("--metrics-hold", "%sneeds --metrics-port", "");
    return port < 0 ? 0 : nxr_tool_metrics_start(m, (unsigned)port, hold);
}

static void progress(void *arg, size_t done, size_t total)
{
    (void)arg;
    const int width = 30;
    int filled = (int)((double)done / (double)total * width);
    fprintf(stderr, "\r  serving [%.*s%*s] %zu/%zu rounds", filled,
            "##############################", width - filled, "", done, total);
    if (done == total)
        fprintf(stderr, "\r%*s\r", width + 40, "");
    fflush(stderr);
}

/* The OpenMP path calls OpenBLAS's GEMM from every OpenMP thread, so
 * OpenBLAS must run one thread per call. Its process-wide setter is not
 * enough: a pthreads OpenBLAS starts its own thread pool when it loads,
 * which then competes with every path for the CPUs. Only
 * OPENBLAS_NUM_THREADS=1 at load stops that, so the demo sets it and
 * re-executes itself once (nxr's own kernels are native by default and do
 * not use OpenBLAS). */
static void openblas_single_threaded(char **argv_full)
{
    const char *v = getenv("OPENBLAS_NUM_THREADS");
    if (v != NULL && strcmp(v, "1") == 0)
        return;
    if (setenv("OPENBLAS_NUM_THREADS", "1", 1) != 0)
        return;
    execv("/proc/self/exe", argv_full);
    /* No re-exec (no /proc): run on; the OpenMP path then shares the CPUs
     * with OpenBLAS's idle pool. */
}

int nxr_tool_demo_run(const struct nxr_tool_demo_kind *k, const void *config,
                      void (**hook)(void *, nxr_runtime_t *, bool), void **hook_arg, long port,
                      long hold, bool json)
{
    struct nxr_tool_metrics metrics = {0};
    int rc = nxr_tool_demo_metrics_start(&metrics, port, hold);
    if (rc != 0)
        return rc;
    if (port >= 0) {
        *hook = nxr_tool_metrics_hook;
        *hook_arg = &metrics;
    }
    void *res = malloc(k->result_size);
    bool bad_input = false;
    if (res == NULL) {
        fprintf(stderr, "nxr demo: out of memory\n");
        rc = 1;
    } else if ((rc = k->run(config, res, &bad_input)) != 0) {
        fprintf(stderr, "nxr demo: %s\n", k->error(res));
        rc = bad_input ? 2 : 1;
    } else {
        k->report(res, json);
        /* The report first: a scraper that waits for it then reads the last
         * counters (--metrics-hold). */
        fflush(stdout);
    }
    nxr_tool_metrics_finish(&metrics);
    free(res);
    return rc;
}

static int mlp_run(const void *config, void *result, bool *bad_input)
{
    return svc_demo_run(config, result, bad_input);
}

static const char *mlp_error(const void *result)
{
    return ((const struct svc_demo_result *)result)->error;
}

static void mlp_report(const void *result, bool json)
{
    if (json)
        svc_report_json(stdout, result);
    else
        svc_report_text(stdout, result);
}

/* --weights: packed or plain, and that it was given (the default depends
 * on the executor). */
struct weights_flag {
    struct svc_demo_config *config;
    bool given;
};

static int weights_flag(const char *flag, const char *value, void *to)
{
    struct weights_flag *w = to;
    if (svc_weights_parse(value, &w->config->weights) != 0)
        return nxr_tool_demo_bad(flag, "'%s' is not packed or plain", value);
    w->given = true;
    return 0;
}

static int executor_flag(const char *flag, const char *value, void *to)
{
    if (svc_executor_parse(value, to) != 0)
        return nxr_tool_demo_bad(flag, "'%s' is not nxr, openmp or pool", value);
    return 0;
}

int nxr_tool_demo(int argc, char **argv)
{
    openblas_single_threaded(argv - 2);
    /* --model picks the run: the language model (the default) or the MLP
     * service, whose flags and JSON stay as they were (scripts read them). */
    const char *model = "llama";
    for (int i = 0; i < argc; i++) {
        int taken = 0;
        if (strcmp(argv[i], "--model") == 0) {
            if (i + 1 >= argc) {
                fprintf(stderr, "nxr demo: --model: needs a value\n");
                return 2;
            }
            model = argv[i + 1];
            taken = 2;
        } else if (strncmp(argv[i], "--model=", 8) == 0) {
            model = argv[i] + 8;
            taken = 1;
        }
        if (taken > 0) {
            memmove(argv + i, argv + i + taken, (size_t)(argc - i - taken) * sizeof(argv[0]));
            argc -= taken;
            break;
        }
    }
    if (strcmp(model, "llama") == 0)
        return nxr_tool_demo_llama(argc, argv);
    if (strcmp(model, "mlp") != 0)
        return nxr_tool_demo_bad("--model", "'%s' is not llama or mlp", model);
    struct svc_demo_config c;
    svc_demo_config_init(&c);
    bool json = false;
    long metrics_port = -1, metrics_hold = 0;
    struct weights_flag weights = {.config = &c};
    const struct nxr_tool_flag_spec flags[] = {
        NXR_TOOL_FLAG("--json", NXR_TOOL_FLAG_SET, &json),
        NXR_TOOL_FLAG("--no-compare", NXR_TOOL_FLAG_CLEAR, &c.compare),
        NXR_TOOL_FLAG("--span", NXR_TOOL_FLAG_SET, &c.span),
        NXR_TOOL_FLAG_NUM("--requests", NXR_TOOL_FLAG_SIZE, &c.requests, 1, 10000000),
        NXR_TOOL_FLAG_NUM("--clients", NXR_TOOL_FLAG_UINT, &c.clients, 1, 256),
        NXR_TOOL_FLAG_MIN_MAX("--batch", &c.batch_min, &c.batch_max, 1, 1024),
        NXR_TOOL_FLAG_NUM("--hidden", NXR_TOOL_FLAG_SIZE, &c.hidden, 8, 8192),
        NXR_TOOL_FLAG_NUM("--layers", NXR_TOOL_FLAG_SIZE, &c.layers, 1, 256),
        NXR_TOOL_FLAG("--domains", NXR_TOOL_FLAG_TEXT, &c.domains),
        NXR_TOOL_FLAG_PARSE("--executor", &c.executor, executor_flag),
        NXR_TOOL_FLAG_NUM("--seed", NXR_TOOL_FLAG_U64, &c.seed, 0, UINT64_MAX),
        NXR_TOOL_FLAG_NUM("--time-budget", NXR_TOOL_FLAG_SECONDS, &c.time_budget_s, 0, 86400),
        NXR_TOOL_FLAG_NUM("--max-batch", NXR_TOOL_FLAG_SIZE, &c.max_batch, 1, 4096),
        NXR_TOOL_FLAG_PARSE("--weights", &weights, weights_flag),
        NXR_TOOL_FLAG_NUM("--compete", NXR_TOOL_FLAG_UINT, &c.compete, 0, SVC_COMPETE_MAX),
        NXR_TOOL_FLAG_NUM("--machine", NXR_TOOL_FLAG_SECONDS, &c.machine_s, 0, 600),
        NXR_TOOL_FLAG_PARSE("--plot", &c.plot_path, nxr_tool_demo_plot),
        NXR_TOOL_METRICS_FLAGS(&metrics_port, &metrics_hold),
    };
    int rc = nxr_tool_flags_parse(argc, argv, flags, sizeof flags / sizeof flags[0]);
    if (rc != 0)
        return rc;
    /* Packed weights live in nxr's own domains; attached executors serve
     * plain ones unless told otherwise (which the config check refuses). */
    if (!weights.given && c.executor != SVC_EXECUTOR_NXR)
        c.weights = SVC_WEIGHTS_PLAIN;
    if (isatty(STDERR_FILENO)) {
        c.progress = progress;
        c.progress_arg = NULL;
    }
    static const struct nxr_tool_demo_kind mlp = {
        .result_size = sizeof(struct svc_demo_result),
        .run = mlp_run,
        .error = mlp_error,
        .report = mlp_report,
    };
    return nxr_tool_demo_run(&mlp, &c, &c.runtime_hook, &c.runtime_hook_arg, metrics_port,
                             metrics_hold, json);
}
