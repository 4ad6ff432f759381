/*
 * bench/kernels: nxr's kernel calls through a context against their peers,
 * in one run, at one thread count: the first domain's budget.
 *
 *   (a) SGEMM, n = 512 and 2048, square, row-major: a runtime whose GEMM
 *       provider is OpenBLAS (opts.providers[GEMM], what NXR_GEMM=openblas
 *       selects), called with nxr_sgemm(ctx), against cblas_sgemm called
 *       directly, with OpenBLAS's count set to the budget for both (goal:
 *       ctx/direct >= 0.97). The placement rule nxr applied is printed: with
 *       the default strict policy on a domain that is the whole allowed set
 *       and a count within the budget it is "domain" (OpenBLAS runs at its
 *       own count under the domain's permit); where strict rejects it, the
 *       run switches to the exclusive policy and says so.
 *   (b) nxr's native SGEMM through a context (split over the domain's
 *       workers) against the same direct OpenBLAS.
 *   (c) (a) and (b) again in a child process that the benchmark starts with
 *       OPENBLAS_CORETYPE set (OpenBLAS reads it when it loads, so only a
 *       re-exec can change it), printed as separate, labelled rows: on some
 *       CPUs OpenBLAS's own pick is far from its best kernel set.
 *   (d) STREAM triad a = b + s c on three arrays of 64 MiB (out of every
 *       cache): nxr_triad on the domain against an OpenMP triad in this
 *       binary with the same thread count and static schedule (goal:
 *       nxr/OpenMP >= 0.95). GB/s counts 12 bytes per element (STREAM's
 *       convention: no write-allocate traffic).
 *
 * Method: contenders alternate round by round, so load from other processes
 * hits each alike, and the order within a round flips every round (the first
 * call after a pause finds its threads asleep, the second finds them
 * spinning). GFLOP/s and GB/s are medians over rounds; a ratio is the median
 * over pairs of consecutive rounds (one of each order) of the pair's summed
 * times, so neither the order nor slow drift in the machine's load biases
 * it. A contender's turn is a burst of calls back to back (32 at n = 512, 4
 * at 2048, 4 triads), timed together: the throughput a service running GEMMs sees.
 * The first call after the pause pays for waking the library's threads
 * (nxr's after its rhythm let them park, OpenBLAS's after its spin), and
 * that cost is bench/forkjoin's subject, not this one's. Native SGEMM also
 * runs on a runtime capped at one thread, the reference for what the
 * domain's other threads add (goal at 512: >= 1.7x, and >= 0.9x OpenBLAS
 * on as many threads). Before a
 * contender whose threads differ from the previous one's (OpenBLAS, nxr,
 * OpenMP), the benchmark sleeps long enough for the others' spinning
 * threads to go to sleep (OpenBLAS's spin ~0.1 s, libgomp's and nxr's
 * under a few ms), so no contender pays for another's spin.
 *
 *   (e) the per-call cost at decode's small shapes (kernels_percall.h):
 *       nxr_sgemm_packed m = 1 against the same product as an
 *       nxr_parallel_for row loop (goal: at most 1.2x at 288 x 288).
 *   (f) the service's own products (kernels_layer.h): a 110m layer's packed
 *       f32 W from memory at the rows a serving step runs, against the read
 *       of the same copies and cblas_sgemm. --only-layer: those rows alone.
 *
 *   bazel run //bench:kernels -- [--json] [--reps N] [--coretype NAME|none]
 *                                [--triad-mib M] [--short] [--only-percall]
 * --short (CI's bench stage): 2 rounds, SGEMM at n = 128 and 256 in the rows
 * named 512 and 2048 ("sgemm_n" says which), no coretype run, a 4 MiB triad
 * and the 4 MiB GEMV only, and the weight formats at 4 MiB.
 * --formats-mib: f32 MiB of W in the weight-formats rows (kernels_formats.h;
 * default 64); --formats-k: their k (default 4096 from 64 MiB up, else 1024;
 * 768 is a decode step's). --only-formats: those rows alone.
 * --reps: rounds at n = 2048 (default 12; n = 512 and the triad use 3x).
 * --coretype: the OPENBLAS_CORETYPE of (c) (default: Haswell on CPUs with
 * AVX2, else none). The benchmark never changes the coretype of the tests.
 */
#include <cblas.h>
#include <errno.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "kernels/internal/cpu.h"
#include "kernels/internal/rules.h"
#include "runtime/internal/runtime.h"

#include "bench/kernels_util.h"
#include "bench/kernels_percall.h"
#include "bench/kernels_formats.h"
#include "bench/kernels_layer.h"
#include "bench/kernels_small.h"

/* Calls per contender's turn (see the file comment): a turn at n = 512 is
 * ~20 ms, so the first calls after the settle weigh in as they do in a
 * service that runs GEMMs back to back. (On the 2-vCPU VM this was tuned
 * on, a second vCPU idle for 150 ms takes ~15 ms to reach full speed
 * again: a turn of 8 calls measured mostly that.) */
#define BURST_512   32
#define BURST_2048  4
#define BURST_TRIAD 4 /* ~5 ms each at 3 x 64 MiB */

enum family last_family = FAM_NONE;

/* The SGEMM rows' n: 512 and 2048 (the JSON keys name them so); --short
 * (CI's bench stage) runs them at 128 and 256 and says so in "sgemm_n". */
static size_t sgemm_n[2] = {512, 2048};

/* ---- SGEMM ----------------------------------------------------------------- */

struct sgemm_row {
    size_t n;
    double ctx, direct, native, native1; /* GFLOP/s, medians */
    /* Medians over round pairs (see the file comment). */
    double ctx_vs_direct, native_vs_direct, native_vs_native1;
};

struct sgemm_report {
    char core[64];
    char rule[16];
    char policy[16];
    int count;
    unsigned budget;
    struct sgemm_row rows[2];
};

/* C_NATIVE1: the native kernels on a runtime capped at one thread, the
 * reference for how much the domain's second thread adds. */
enum contender { C_CTX, C_DIRECT, C_NATIVE, C_NATIVE1, C_COUNT };

static enum family family_of(enum contender c)
{
    return c == C_NATIVE || c == C_NATIVE1 ? FAM_NXR : FAM_OPENBLAS;
}

/* The native runtimes: the domain's budget, and one thread. */
struct natives {
    struct rt all, one;
};

/* One call; the caller settles first (outside its timer). */
static int run_contender(enum contender c, struct rt *ob, struct natives *nat,
                         const struct nxr_sgemm_args *g)
{
    switch (c) {
    case C_CTX:
        return nxr_sgemm(ob->ctx, g);
    case C_DIRECT:
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)g->m, (int)g->n, (int)g->k,
                    g->alpha, g->a, (int)g->lda, g->b, (int)g->ldb, g->beta, g->c, (int)g->ldc);
        return 0;
    case C_NATIVE:
        return nxr_sgemm(nat->all.ctx, g);
    case C_NATIVE1:
        return nxr_sgemm(nat->one.ctx, g);
    case C_COUNT:
        break;
    }
    return -EINVAL;
}

/* One contender's turn: `burst` calls back to back, timed together. */
static double run_burst(enum contender c, struct rt *ob, struct natives *nat,
                        const struct nxr_sgemm_args *g, int burst)
{
    double t0 = bench_now();
    for (int i = 0; i < burst; i++) {
        int rc = run_contender(c, ob, nat, g);
        if (rc != 0)
            die("sgemm", rc);
    }
    return (bench_now() - t0) / burst;
}

static void sgemm_size(struct sgemm_row *row, size_t n, int reps, int burst, struct rt *ob,
                       struct natives *nat)
{
    float *a = alloc_floats(n * n), *b = alloc_floats(n * n), *c = alloc_floats(n * n);
    for (size_t i = 0; i < n * n; i++) {
        a[i] = (float)((i * 7) % 13) / 13.0f - 0.5f;
        b[i] = (float)((i * 5) % 11) / 11.0f - 0.5f;
        c[i] = 0.0f;
    }
    struct nxr_sgemm_args g = {.m = n,
                          .n = n,
                          .k = n,
                          .alpha = 1.0f,
                          .a = a,
                          .lda = n,
                          .b = b,
                          .ldb = n,
                          .beta = 0.0f,
                          .c = c,
                          .ldc = n};
    double *t[C_COUNT];
    for (int k = 0; k < C_COUNT; k++) {
        t[k] = calloc((size_t)reps, sizeof(double));
        settle(family_of((enum contender)k));
        int rc = run_contender((enum contender)k, ob, nat, &g); /* warm-up */
        if (rc != 0)
            die("sgemm warm-up", rc);
    }
    /* The two OpenBLAS contenders alternate order each round, and so do the
     * two native ones, which run last (one settle per switch of library
     * instead of two). */
    for (int r = 0; r < reps; r++) {
        enum contender order[C_COUNT] = {r % 2 ? C_DIRECT : C_CTX, r % 2 ? C_CTX : C_DIRECT,
                                         r % 2 ? C_NATIVE1 : C_NATIVE,
                                         r % 2 ? C_NATIVE : C_NATIVE1};
        for (int k = 0; k < C_COUNT; k++) {
            settle(family_of(order[k]));
            t[order[k]][r] = run_burst(order[k], ob, nat, &g, burst);
        }
    }
    double flop = 2.0 * (double)n * (double)n * (double)n;
    row->n = n;
    /* Before the medians below: bench_median() sorts in place. */
    row->ctx_vs_direct = pair_ratio(t[C_DIRECT], t[C_CTX], reps);
    row->native_vs_direct = pair_ratio(t[C_DIRECT], t[C_NATIVE], reps);
    row->native_vs_native1 = pair_ratio(t[C_NATIVE1], t[C_NATIVE], reps);
    row->ctx = flop / bench_median(t[C_CTX], reps) * 1e-9;
    row->direct = flop / bench_median(t[C_DIRECT], reps) * 1e-9;
    row->native = flop / bench_median(t[C_NATIVE], reps) * 1e-9;
    row->native1 = flop / bench_median(t[C_NATIVE1], reps) * 1e-9;
    for (int k = 0; k < C_COUNT; k++)
        free(t[k]);
    free(a);
    free(b);
    free(c);
}

/* (a) and (b) with this process's OpenBLAS core. */
static void sgemm_section(struct sgemm_report *rep, int reps)
{
    struct natives nat;
    rt_open(&nat.all, NULL, NXR_PROVIDER_POLICY_DEFAULT);
    rt_open_threads(&nat.one, 1);
    unsigned budget = nxr_ctx_budget(nat.all.ctx);
    /* Same thread count everywhere: OpenBLAS's global count = the budget. */
    openblas_set_num_threads((int)budget);

    nxr_provider_t *p;
    int rc = nxr_provider_openblas_create(&p);
    if (rc != 0)
        die("OpenBLAS provider", rc);
    struct rt ob;
    int policy = NXR_PROVIDER_STRICT; /* the default */
    rt_open(&ob, p, policy);
    nxr_domain_t *d = nxr_ctx_domain(ob.ctx);
    bool whole = hwloc_bitmap_isequal(nxr_domain_cpuset(d), nxr_runtime_allowed_cpus(ob.rt));
    struct nxr__run_decision dec =
        nxr__provider_decide_now(p, budget, whole, (enum nxr_provider_policy)policy);
    if (dec.run == NXR_RUN_REJECT) {
        /* Strict placement refuses it here (a partial domain): measure what
         * a service would configure instead. */
        rt_close(&ob);
        policy = NXR_PROVIDER_PROCESS_EXCLUSIVE;
        rt_open(&ob, p, policy);
        dec = nxr__provider_decide_now(p, budget, whole, (enum nxr_provider_policy)policy);
    }
    snprintf(rep->rule, sizeof rep->rule, "%s", nxr__run_name(dec.run));
    snprintf(rep->policy, sizeof rep->policy, "%s",
             policy == NXR_PROVIDER_STRICT ? "strict" : "exclusive");
    snprintf(rep->core, sizeof rep->core, "%s", openblas_get_corename());
    rep->count = openblas_get_num_threads();
    rep->budget = budget;

    sgemm_size(&rep->rows[0], sgemm_n[0], 3 * reps, BURST_512, &ob, &nat);
    sgemm_size(&rep->rows[1], sgemm_n[1], reps, BURST_2048, &ob, &nat);
    rt_close(&ob);
    rt_close(&nat.all);
    rt_close(&nat.one);
    nxr_provider_destroy(p);
}

/* Child mode: one line per value, read back by the parent. */
static int child_main(int reps)
{
    struct sgemm_report rep;
    sgemm_section(&rep, reps);
    printf("core %s\nrule %s\npolicy %s\ncount %d\n", rep.core, rep.rule, rep.policy, rep.count);
    for (int i = 0; i < 2; i++)
        printf("row %zu %.3f %.3f %.3f %.5f %.5f %.3f %.5f\n", rep.rows[i].n, rep.rows[i].ctx,
               rep.rows[i].direct, rep.rows[i].native, rep.rows[i].ctx_vs_direct,
               rep.rows[i].native_vs_direct, rep.rows[i].native1, rep.rows[i].native_vs_native1);
    return 0;
}

/* (c): re-runs this binary in child mode with OPENBLAS_CORETYPE set.
 * Returns false (with a message) when the child failed. */
static bool sgemm_with_coretype(const char *core, int reps, struct sgemm_report *rep)
{
    int fd[2];
    if (pipe(fd) != 0)
        return false;
    pid_t pid = fork();
    if (pid < 0)
        return false;
    if (pid == 0) {
        dup2(fd[1], STDOUT_FILENO);
        close(fd[0]);
        close(fd[1]);
        setenv("OPENBLAS_CORETYPE", core, 1);
        char reps_arg[16];
        snprintf(reps_arg, sizeof reps_arg, "%d", reps);
        execl("/proc/self/exe", "kernels", "--sgemm-child", reps_arg, (char *)NULL);
        _exit(127);
    }
    close(fd[1]);
    FILE *in = fdopen(fd[0], "r");
    char line[256];
    int rows = 0;
    memset(rep, 0, sizeof *rep);
    while (in != NULL && fgets(line, sizeof line, in) != NULL) {
        struct sgemm_row *r = &rep->rows[rows < 2 ? rows : 1];
        if (sscanf(line, "core %63s", rep->core) == 1 ||
            sscanf(line, "rule %15s", rep->rule) == 1 ||
            sscanf(line, "policy %15s", rep->policy) == 1 ||
            sscanf(line, "count %d", &rep->count) == 1)
            continue;
        if (sscanf(line, "row %zu %lf %lf %lf %lf %lf %lf %lf", &r->n, &r->ctx, &r->direct,
                   &r->native, &r->ctx_vs_direct, &r->native_vs_direct, &r->native1,
                   &r->native_vs_native1) == 8)
            rows++;
    }
    if (in != NULL)
        fclose(in);
    int status;
    waitpid(pid, &status, 0);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0 || rows != 2) {
        fprintf(stderr, "kernels: the OPENBLAS_CORETYPE=%s run failed\n", core);
        return false;
    }
    return true;
}

/* ---- STREAM triad ----------------------------------------------------------------- */

static void omp_triad(size_t n, float *a, const float *b, const float *c, float s, int threads)
{
/* `simd`: what STREAM's OpenMP build gets from -O3; GCC's -O2 cost model
 * may leave this loop scalar. */
#pragma omp parallel for simd schedule(static) num_threads(threads)
    for (size_t i = 0; i < n; i++)
        a[i] = b[i] + s * c[i];
}

struct triad_report {
    size_t mib;
    double nxr, omp; /* GB/s, medians */
    double ratio;    /* nxr/OpenMP: median over round pairs */
};

static void triad_section(struct triad_report *rep, size_t mib, int reps)
{
    struct rt nat;
    rt_open(&nat, NULL, NXR_PROVIDER_POLICY_DEFAULT);
    int threads = (int)nxr_ctx_budget(nat.ctx);
    omp_set_dynamic(0);
    size_t n = mib * ((size_t)1 << 20) / sizeof(float);
    float *a = alloc_floats(n), *b = alloc_floats(n), *c = alloc_floats(n);
    /* First touch in the OpenMP layout; one node here, and the same pages
     * serve both contenders. */
#pragma omp parallel for schedule(static) num_threads(threads)
    for (size_t i = 0; i < n; i++) {
        a[i] = 0.0f;
        b[i] = 1.0f;
        c[i] = 2.0f;
    }
    double *tn = calloc((size_t)reps, sizeof(double)), *to = calloc((size_t)reps, sizeof(double));
    const float s = 3.0f;
    settle(FAM_NXR);
    if (nxr_triad(nat.ctx, n, b, c, s, a) != 0) /* warm-up */
        die("triad", -EINVAL);
    settle(FAM_OMP);
    omp_triad(n, a, b, c, s, threads);
    for (int r = 0; r < reps; r++) {
        for (int k = 0; k < 2; k++) {
            bool nxr_turn = (k == 0) == (r % 2 == 0);
            settle(nxr_turn ? FAM_NXR : FAM_OMP);
            double t0 = bench_now();
            for (int i = 0; i < BURST_TRIAD; i++) {
                if (!nxr_turn) {
                    omp_triad(n, a, b, c, s, threads);
                    continue;
                }
                int rc = nxr_triad(nat.ctx, n, b, c, s, a);
                if (rc != 0)
                    die("triad", rc);
            }
            (nxr_turn ? tn : to)[r] = (bench_now() - t0) / BURST_TRIAD;
        }
    }
    double bytes = 3.0 * (double)n * sizeof(float);
    rep->mib = mib;
    rep->ratio = pair_ratio(to, tn, reps); /* before bench_median() sorts them */
    rep->nxr = bytes / bench_median(tn, reps) * 1e-9;
    rep->omp = bytes / bench_median(to, reps) * 1e-9;
    if (a[n / 2] != 1.0f + s * 2.0f)
        fprintf(stderr, "kernels: triad result wrong (%g)\n", (double)a[n / 2]);
    free(tn);
    free(to);
    free(a);
    free(b);
    free(c);
    rt_close(&nat);
}

/* ---- output ------------------------------------------------------------------------ */

static const char *goal(double ratio, double want)
{
    return ratio >= want ? "met" : "MISSED";
}

static void print_rows(const char *label, const struct sgemm_report *rep)
{
    for (int i = 0; i < 2; i++) {
        const struct sgemm_row *r = &rep->rows[i];
        printf("%-36s %5zu  %9.1f  %9.1f  %7.3f  %9.1f  %7.3f  %9.1f  %7.3f\n", label, r->n,
               r->ctx, r->direct, r->ctx_vs_direct, r->native, r->native_vs_direct, r->native1,
               r->native_vs_native1);
    }
}

static void json_rows(const char *suffix, const struct sgemm_report *rep)
{
    const struct sgemm_row *r512 = &rep->rows[0], *r2048 = &rep->rows[1];
    printf(",\"sgemm_ctx_gflops%s\":%.2f,\"sgemm_direct_gflops%s\":%.2f,"
           "\"sgemm_ctx_vs_direct%s\":%.4f,\"native_sgemm_gflops%s\":%.2f,"
           "\"native_vs_openblas%s\":%.4f",
           suffix, r2048->ctx, suffix, r2048->direct, suffix, r2048->ctx_vs_direct, suffix,
           r2048->native, suffix, r2048->native_vs_direct);
    printf(",\"sgemm_512_ctx_gflops%s\":%.2f,\"sgemm_512_direct_gflops%s\":%.2f,"
           "\"sgemm_512_ctx_vs_direct%s\":%.4f,\"native_sgemm_512_gflops%s\":%.2f,"
           "\"native_512_vs_openblas%s\":%.4f,\"native_512_1t_gflops%s\":%.2f,"
           "\"native_512_vs_1t%s\":%.4f",
           suffix, r512->ctx, suffix, r512->direct, suffix, r512->ctx_vs_direct, suffix,
           r512->native, suffix, r512->native_vs_direct, suffix, r512->native1, suffix,
           r512->native_vs_native1);
}

/* One section run alone (--only-*): its JSON wrapped in an object of its
 * own (the threads and reps the full run's object names first), or its
 * text as it stands. */
static void alone_open(bool json, unsigned threads, int reps)
{
    if (json)
        printf("{\"threads\":%u,\"reps\":%d", threads, reps);
}

static int alone_close(bool json)
{
    if (json)
        printf("}\n");
    return 0;
}

int main(int argc, char **argv)
{
    bool json = false, skip_small = false;
    int reps = 12;
    size_t triad_mib = 64, formats_mib = 64, formats_k = 0;
    bool only_formats = false, only_percall = false, only_layer = false, short_run = false;
    const char *core = nxr__cpu_tier() >= NXR_TIER_AVX2 ? "Haswell" : NULL;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--sgemm-child") == 0 && i + 1 < argc)
            return child_main(atoi(argv[i + 1]));
        if (strcmp(argv[i], "--json") == 0) {
            json = true;
        } else if (strcmp(argv[i], "--reps") == 0 && i + 1 < argc) {
            reps = atoi(argv[++i]);
        } else if (strcmp(argv[i], "--coretype") == 0 && i + 1 < argc) {
            core = argv[++i];
            if (strcmp(core, "none") == 0)
                core = NULL;
        } else if (strcmp(argv[i], "--gemv-mib") == 0 && i + 1 < argc) {
            small_only_mib = (size_t)atol(argv[++i]);
        } else if (strcmp(argv[i], "--only-small") == 0) {
            struct small_report small;
            small_section(&small, reps);
            small_print_text(&small, 0.0);
            return 0;
        } else if (strcmp(argv[i], "--only-percall") == 0) {
            only_percall = true;
        } else if (strcmp(argv[i], "--only-layer") == 0) {
            only_layer = true;
        } else if (strcmp(argv[i], "--short") == 0) {
            /* CI's bench stage: every section runs, small and briefly. */
            short_run = true;
            reps = 2;
            core = NULL;
            triad_mib = 4;
            small_only_mib = 4;
            formats_mib = 4;
            sgemm_n[0] = 128;
            sgemm_n[1] = 256;
        } else if (strcmp(argv[i], "--formats-mib") == 0 && i + 1 < argc) {
            formats_mib = (size_t)atol(argv[++i]);
        } else if (strcmp(argv[i], "--formats-k") == 0 && i + 1 < argc) {
            formats_k = (size_t)atol(argv[++i]);
        } else if (strcmp(argv[i], "--only-formats") == 0) {
            only_formats = true;
        } else if (strcmp(argv[i], "--no-small") == 0) {
            skip_small = true;
        } else if (strcmp(argv[i], "--triad-mib") == 0 && i + 1 < argc) {
            triad_mib = (size_t)atol(argv[++i]);
        } else {
            fprintf(
                stderr,
                "usage: kernels [--json] [--short] [--reps N] [--coretype NAME|none] "
                "[--triad-mib M] [--gemv-mib M] [--formats-mib M] [--formats-k K] [--only-small] "
                "[--only-formats] [--only-percall] [--only-layer] [--no-small]\n");
            return 2;
        }
    }
    if (reps < 2 || reps > 1000 || triad_mib < 1 || formats_mib < 1 || formats_mib > 4096 ||
        formats_k > formats_mib * ((size_t)1 << 18)) {
        fprintf(stderr, "kernels: bad --reps, --triad-mib, --formats-mib or --formats-k\n");
        return 2;
    }
    if (only_percall) { /* the per-call rows alone */
        struct percall_report percall;
        percall_section(&percall, reps);
        alone_open(json, percall.threads, reps);
        json ? percall_print_json(&percall) : percall_print_text(&percall);
        return alone_close(json);
    }
    if (only_layer) { /* the service's products alone */
        struct layer_report lr;
        layer_section(&lr, short_run, reps);
        alone_open(json, lr.threads, reps);
        json ? layer_print_json(&lr) : layer_print_text(&lr);
        return alone_close(json);
    }
    if (only_formats) { /* the weight-format rows alone */
        struct formats_report fr;
        formats_section(&fr, formats_mib, formats_k, reps);
        alone_open(json, fr.threads, reps);
        json ? formats_print_json(&fr) : formats_print_text(&fr);
        return alone_close(json);
    }
    if (getenv("OPENBLAS_CORETYPE") != NULL)
        fprintf(stderr, "kernels: note: OPENBLAS_CORETYPE=%s is set for the default rows too\n",
                getenv("OPENBLAS_CORETYPE"));
    const int original_count = openblas_get_num_threads();

    struct sgemm_report base, typed;
    sgemm_section(&base, reps);
    bool have_typed = core != NULL && sgemm_with_coretype(core, reps, &typed);
    struct triad_report triad;
    triad_section(&triad, triad_mib, 3 * reps);
    struct small_report small;
    struct formats_report fmts;
    struct layer_report layer;
    if (!skip_small) {
        small_section(&small, reps);
        formats_section(&fmts, formats_mib, formats_k, reps);
        layer_section(&layer, short_run, reps);
    }
    struct percall_report percall;
    percall_section(&percall, reps);
    openblas_set_num_threads(original_count);

    const struct sgemm_row *r2048 = &base.rows[1];
    if (json) {
        printf("{\"threads\":%u,\"openblas_core\":\"%s\",\"openblas_count\":%d,"
               "\"openblas_count_at_start\":%d,\"rule\":\"%s\",\"policy\":\"%s\",\"reps\":%d,"
               "\"sgemm_n\":[%zu,%zu]",
               base.budget, base.core, base.count, original_count, base.rule, base.policy, reps,
               sgemm_n[0], sgemm_n[1]);
        json_rows("", &base);
        if (have_typed) {
            printf(",\"coretype\":\"%s\",\"coretype_core\":\"%s\"", core, typed.core);
            json_rows("_coretype", &typed);
        }
        printf(",\"triad_mib_per_array\":%zu,\"triad_gbs\":%.2f,\"omp_triad_gbs\":%.2f,"
               "\"triad_vs_omp\":%.4f",
               triad.mib, triad.nxr, triad.omp, triad.ratio);
        printf(",\"native_2048_gflops\":%.2f", r2048->native);
        if (!skip_small) {
            small_print_json(&small);
            formats_print_json(&fmts);
            layer_print_json(&layer);
        }
        percall_print_json(&percall);
        printf("}\n");
        return 0;
    }
    printf("nxr kernels benchmark: %u threads (the domain's budget) for every contender\n",
           base.budget);
    printf("OpenBLAS through the context: policy %s, rule '%s' (OpenBLAS count %d, budget %u; "
           "count at start %d)\n",
           base.policy, base.rule, base.count, base.budget, original_count);
    printf("\nSGEMM, GFLOP/s (medians; %d rounds at 2048, %d at 512)\n", reps, 3 * reps);
    printf("%-36s %5s  %9s  %9s  %7s  %9s  %7s  %9s  %7s\n", "OpenBLAS core", "n", "ctx+OB",
           "direct OB", "ctx/dir", "native", "nat/OB", "native 1t", "nat/1t");
    char label[96];
    snprintf(label, sizeof label, "default (%s)", base.core);
    print_rows(label, &base);
    if (have_typed) {
        snprintf(label, sizeof label, "OPENBLAS_CORETYPE=%s (%s)", core, typed.core);
        print_rows(label, &typed);
        if (strcmp(typed.rule, base.rule) != 0)
            printf("  (rule in that run: '%s')\n", typed.rule);
    }
    printf("\nSTREAM triad a = b + s c, 3 x %zu MiB, GB/s (medians of %d): nxr_triad %.2f, "
           "OpenMP %.2f, nxr/OpenMP %.3f\n",
           triad.mib, 3 * reps, triad.nxr, triad.omp, triad.ratio);
    const struct sgemm_row *r512 = &base.rows[0];
    printf("\ngoals: sgemm 2048 ctx/direct %.3f >= 0.97 %s; native 512 vs OpenBLAS %.3f >= 0.9 %s,"
           " vs native on 1 thread %.3f >= 1.7 %s; triad nxr/OpenMP %.3f >= 1.0 %s\n",
           r2048->ctx_vs_direct, goal(r2048->ctx_vs_direct, 0.97), r512->native_vs_direct,
           goal(r512->native_vs_direct, 0.9), r512->native_vs_native1,
           goal(r512->native_vs_native1, 1.7), triad.ratio, goal(triad.ratio, 1.0));
    if (!skip_small) {
        small_print_text(&small, r2048->native);
        formats_print_text(&fmts);
        layer_print_text(&layer);
    }
    percall_print_text(&percall);
    return 0;
}
