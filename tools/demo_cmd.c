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

int nxr_tool_demo_bad(const char *flag, const char *fmt, const char *value)
{
    fprintf(stderr, "nxr demo: %s: ", flag);
    fprintf(stderr, fmt, value);
    fputc('\n', stderr);
    return 2;
}

int nxr_tool_demo_flag(int argc, char **argv, int *i, const char *const *plain, size_t nplain,
                       const char *const *valued, size_t nvalued, struct nxr_tool_flag *f)
{
    f->name = argv[*i];
    f->value = NULL;
    const char *eq = strchr(f->name, '=');
    if (strncmp(f->name, "--", 2) == 0 && eq != NULL && (size_t)(eq - f->name) < sizeof f->buf) {
        memcpy(f->buf, f->name, (size_t)(eq - f->name));
        f->buf[eq - f->name] = '\0';
        f->name = f->buf;
        f->value = eq + 1;
    }
    for (size_t k = 0; k < nplain; k++)
        if (strcmp(f->name, plain[k]) == 0) {
            if (f->value != NULL)
                return nxr_tool_demo_bad(f->name, "takes no value (got '%s')", f->value);
            return 0;
        }
    bool known = false;
    for (size_t k = 0; k < nvalued; k++)
        known |= strcmp(f->name, valued[k]) == 0;
    if (!known) {
        fprintf(stderr, "nxr demo: %s: unknown flag (see nxr --help)\n", f->name);
        return 2;
    }
    if (f->value == NULL) {
        if (*i + 1 >= argc) {
            fprintf(stderr, "nxr demo: %s: needs a value\n", f->name);
            return 2;
        }
        f->value = argv[++*i];
    }
    return 0;
}

int nxr_tool_demo_metrics_flag(const char *flag, const char *value, long *port, long *hold)
{
    uint64_t x;
    int rc;
    if (strcmp(flag, "--metrics-port") == 0) {
        if ((rc = nxr_tool_demo_size(flag, value, 0, 65535, &x)) == 0)
            *port = (long)x;
        return rc;
    }
    if (strcmp(flag, "--metrics-hold") == 0) {
        if ((rc = nxr_tool_demo_size(flag, value, 1, 1000000, &x)) == 0)
            *hold = (long)x;
        return rc;
    }
    return 1;
}

int nxr_tool_demo_metrics_start(struct nxr_tool_metrics *m, long port, long hold)
{
    if (hold > 0 && port < 0)
        return nxr_tool_demo_bad("--metrics-hold", "%sneeds --metrics-port", "");
    return port < 0 ? 0 : nxr_tool_metrics_start(m, (unsigned)port, hold);
}

int nxr_tool_demo_plot(const char *flag, const char *v, const char **out)
{
    if (v[0] == '\0')
        return nxr_tool_demo_bad(flag, "%sis empty (a file name: FILE.svg)", "");
    char dir[4096];
    const char *slash = strrchr(v, '/');
    snprintf(dir, sizeof dir, "%.*s", slash == NULL ? 1 : (int)(slash - v + 1),
             slash == NULL ? "." : v);
    if (access(dir, W_OK) != 0)
        return nxr_tool_demo_bad(flag, "cannot write in the directory of '%s'", v);
    *out = v;
    return 0;
}

/* A decimal integer in [lo, hi], the whole string. */
int nxr_tool_demo_size(const char *flag, const char *v, uint64_t lo, uint64_t hi, uint64_t *out)
{
    char *end;
    errno = 0;
    if (v[0] < '0' || v[0] > '9')
        return nxr_tool_demo_bad(flag, "'%s' is not a non-negative integer", v);
    unsigned long long x = strtoull(v, &end, 10);
    if (errno != 0 || *end != '\0')
        return nxr_tool_demo_bad(flag, "'%s' is not a non-negative integer", v);
    if (x < lo || x > hi) {
        fprintf(stderr, "nxr demo: %s: %s is outside %" PRIu64 "..%" PRIu64 "\n", flag, v, lo, hi);
        return 2;
    }
    *out = x;
    return 0;
}

int nxr_tool_demo_range(const char *flag, const char *v, uint64_t min, uint64_t max, size_t *lo,
                        size_t *hi)
{
    const char *dash = strchr(v, '-');
    char a[32], b[32];
    if (dash == NULL || (size_t)(dash - v) >= sizeof(a) || strlen(dash + 1) >= sizeof(b) ||
        dash == v || dash[1] == '\0')
        return nxr_tool_demo_bad(flag, "'%s' is not MIN-MAX (e.g. 1-16)", v);
    memcpy(a, v, (size_t)(dash - v));
    a[dash - v] = '\0';
    strcpy(b, dash + 1);
    uint64_t x, y;
    if (nxr_tool_demo_size(flag, a, min, max, &x) != 0 ||
        nxr_tool_demo_size(flag, b, min, max, &y) != 0)
        return 2;
    if (x > y)
        return nxr_tool_demo_bad(flag, "'%s': MIN is above MAX", v);
    *lo = (size_t)x;
    *hi = (size_t)y;
    return 0;
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
    bool json = false, weights_given = false;
    long metrics_port = -1, metrics_hold = 0;
    static const char *const plain[] = {"--json", "--no-compare", "--span"};
    static const char *const valued[] = {
        "--requests", "--clients", "--batch",        "--hidden",      "--layers",  "--domains",
        "--executor", "--seed",    "--time-budget",  "--max-batch",   "--weights", "--compete",
        "--machine",  "--plot",    "--metrics-port", "--metrics-hold"};
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
        uint64_t x;
        int rc = 0;
        if (strcmp(flag, "--requests") == 0) {
            if ((rc = nxr_tool_demo_size(flag, value, 1, 10000000, &x)) == 0)
                c.requests = (size_t)x;
        } else if (strcmp(flag, "--clients") == 0) {
            if ((rc = nxr_tool_demo_size(flag, value, 1, 256, &x)) == 0)
                c.clients = (unsigned)x;
        } else if (strcmp(flag, "--batch") == 0) {
            rc = nxr_tool_demo_range(flag, value, 1, 1024, &c.batch_min, &c.batch_max);
        } else if (strcmp(flag, "--hidden") == 0) {
            if ((rc = nxr_tool_demo_size(flag, value, 8, 8192, &x)) == 0)
                c.hidden = (size_t)x;
        } else if (strcmp(flag, "--layers") == 0) {
            if ((rc = nxr_tool_demo_size(flag, value, 1, 256, &x)) == 0)
                c.layers = (size_t)x;
        } else if (strcmp(flag, "--seed") == 0) {
            if ((rc = nxr_tool_demo_size(flag, value, 0, UINT64_MAX, &x)) == 0)
                c.seed = x;
        } else if (strcmp(flag, "--max-batch") == 0) {
            if ((rc = nxr_tool_demo_size(flag, value, 1, 4096, &x)) == 0)
                c.max_batch = (size_t)x;
        } else if (strcmp(flag, "--time-budget") == 0) {
            if ((rc = nxr_tool_demo_size(flag, value, 0, 86400, &x)) == 0)
                c.time_budget_s = (double)x;
        } else if (strcmp(flag, "--machine") == 0) {
            if ((rc = nxr_tool_demo_size(flag, value, 0, 600, &x)) == 0)
                c.machine_s = (double)x;
        } else if (strcmp(flag, "--compete") == 0) {
            if ((rc = nxr_tool_demo_size(flag, value, 0, SVC_COMPETE_MAX, &x)) == 0)
                c.compete = (unsigned)x;
        } else if (strcmp(flag, "--plot") == 0) {
            rc = nxr_tool_demo_plot(flag, value, &c.plot_path);
        } else if ((rc = nxr_tool_demo_metrics_flag(flag, value, &metrics_port, &metrics_hold)) !=
                   1) {
            /* --metrics-port or --metrics-hold: read (0) or refused (2) */
        } else if ((rc = 0) == 0 && strcmp(flag, "--domains") == 0) {
            if (value[0] == '\0')
                return nxr_tool_demo_bad(flag, "%sis empty", "");
            c.domains = value;
        } else if (strcmp(flag, "--weights") == 0) {
            if (svc_weights_parse(value, &c.weights) != 0)
                return nxr_tool_demo_bad(flag, "'%s' is not packed or plain", value);
            weights_given = true;
        } else if (strcmp(flag, "--executor") == 0) {
            if (svc_executor_parse(value, &c.executor) != 0)
                return nxr_tool_demo_bad(flag, "'%s' is not nxr, openmp or pool", value);
        }
        if (rc != 0)
            return rc;
    }
    /* Packed weights live in nxr's own domains; attached executors serve
     * plain ones unless told otherwise (which the config check refuses). */
    if (!weights_given && c.executor != SVC_EXECUTOR_NXR)
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
