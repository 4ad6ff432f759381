/*
 * bench/forkjoin: nxr's fork-join regions against libgomp, LLVM libomp and
 * oneTBB, in one invocation.
 *
 * The sweep: gap between regions {0, 50 us, 500 us, 5 ms} x work per chunk
 * {0, 1 us, 10 us} x chunks {2, budget} (one value when the budget is 2).
 * Per cell and contender: the median region time, and the CPU the process's
 * threads other than the caller used per wall second (gaps included).
 *
 * How the contenders are kept apart. libgomp and libomp cannot share a
 * process (both define the omp_* entry points), and a contender's idle
 * threads must not spin on the CPUs the next one is measured on (libomp's
 * default blocktime is 200 ms). So every contender runs as its own child
 * process, one per (round, gap), which measures its cells and exits: nothing
 * of it is left running when the next starts. Rounds alternate the order of
 * the contenders (a rotation per round and gap), so slow drift of the
 * machine's load falls on all of them; the figure per cell is the median of
 * the rounds' medians. The nxr contender is this program itself
 * (`--contender`); the others are forkjoin_gomp (gcc), forkjoin_libomp
 * (clang -fopenmp=libomp) and forkjoin_tbb (g++), found next to it. All of
 * them time with the same code (forkjoin_peer.h) and the same calibrated
 * work loop; OMP_PROC_BIND=close and OMP_PLACES=cores are set for the OpenMP
 * ones, nxr's caller is bound inside its domain (a service thread pinned to
 * its socket), and each runtime keeps its own spin defaults.
 *
 * Contended: with two CPUs or more, every round measures the same cells
 * again beside a busy process pinned to the domain's highest CPU (another
 * tenant's job; service/compete.h), started after the round's quiet cells
 * and killed before the next round, for every contender alike. A team that
 * waits for a preempted member loses a whole time slice; one whose caller
 * takes the chunks the busy CPU's worker has not started loses one chunk's
 * time (ideal: 2 x 10 us chunks take 20 us on the one CPU left).
 *
 * Also: the CPU an idle nxr team uses per wall second after its window.
 * `--json` prints {region_ratio, idle_cpu_fraction, sweep[...], contended_cpu,
 * contended[...], contended_slowdown, contended_vs_gomp}; region_ratio is back
 * to back, no work, chunks = budget, nxr/libgomp; contended[] has the sweep's
 * cells beside the busy process (null without a second CPU);
 * contended_slowdown is nxr's 2 x 10 us chunks back to back, contended over
 * quiet, contended_vs_gomp the same cell nxr/libgomp, both contended.
 * `--rounds N` (default 3), `--scale X` multiplies the regions per cell,
 * `--quiet-only` skips the contended cells; `--short` (CI's bench stage) is
 * one round at scale 0.02, quiet only.
 * And the inside check's cost on the region path (inside_check_cost below;
 * `--inside-check` prints that row alone).
 * `--json` also has inside_check_*.
 * And the live counters' cost (counter_cost below): this program's nxr
 * contender against forkjoin_nocounters, the same source built with the
 * counters compiled out (NXR_COUNTERS=0), alternated in the same run;
 * `--counter-cost` prints that row alone (`--rounds` pairs, default 9),
 * `--json` has counter_cost_*.
 */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "bench/timing.h"
#include "bench/forkjoin_peer.h"
#include "service/compete.h"
#include "domains/internal/cpuset.h"
#include "runtime/internal/ctx.h"
#include "runtime/internal/runtime.h"

enum { NXR, GOMP, LIBOMP, TBB, CONTENDERS };
static const char *const names[CONTENDERS] = {"nxr", "gomp", "libomp", "tbb"};
static const char *const programs[CONTENDERS] = {"forkjoin", "forkjoin_gomp", "forkjoin_libomp",
                                                 "forkjoin_tbb"};

#define GAPS   4
#define WORKS  3
#define ROUNDS 16
static const uint64_t gaps_ns[GAPS] = {0, 50000, 500000, 5000000};
/* At least this many regions per cell, and at least MIN_MS of them (the
 * process CPU clock needs a long window). */
static const unsigned regions_per_gap[GAPS] = {1000, 1000, 300, 100};
#define MIN_MS 200
static const uint64_t works_ns[WORKS] = {0, 1000, 10000};

/* ---- the nxr contender -------------------------------------------------- */

/* Where the work's result goes, so that it is not optimised away. */
volatile uint64_t forkjoin_sink;

static void nxr_body(void *arg, size_t b, size_t e, unsigned worker)
{
    (void)worker;
    for (size_t i = b; i < e; i++)
        forkjoin_sink = fj_work(*(const uint64_t *)arg);
}

static void nxr_region(void *ctx, unsigned chunks, uint64_t iters)
{
    nxr_parallel_for(ctx, 0, chunks, 1, nxr_body, &iters);
}

/* Binds the calling thread to domain d's CPUs. */
static void bind_inside(nxr_domain_t *d)
{
    struct nxr__cpumask mask;
    if (nxr__cpumask_from_bitmap(&mask, nxr_domain_cpuset(d)) == 0) {
        sched_setaffinity(0, mask.size, mask.set);
        nxr__cpumask_free(&mask);
    }
}

static int open_runtime(nxr_runtime_t **rt, nxr_ctx_t **ctx)
{
    int rc = nxr_runtime_create(NULL, rt);
    if (rc == 0)
        rc = nxr_ctx_create(*rt, nxr_domain_id(nxr_runtime_domain_at(*rt, 0)), ctx);
    if (rc != 0)
        fprintf(stderr, "forkjoin: %s\n", nxr_strerror(rc));
    return rc;
}

static int run_contender(int argc, char **argv)
{
    struct fj_args a;
    if (fj_parse(argc, argv, &a) != 0)
        return 2;
    nxr_runtime_t *rt;
    nxr_ctx_t *ctx;
    if (open_runtime(&rt, &ctx) != 0)
        return 1;
    bind_inside(nxr_ctx_domain(ctx));
    fj_run(&a, nxr_region, ctx);
    nxr_ctx_destroy(ctx);
    nxr_runtime_destroy(rt);
    return 0;
}

/* ---- the driver ----------------------------------------------------------- */

/* Work-loop iterations per microsecond of CPU on this machine (the fastest
 * of a few runs; thread CPU time, so a preemption does not count). */
static double calibrate(void)
{
    const uint64_t iters = 1u << 22;
    uint64_t best = UINT64_MAX;
    for (int i = 0; i < 7; i++) {
        uint64_t t0 = fj_clock_ns(CLOCK_THREAD_CPUTIME_ID);
        forkjoin_sink = fj_work(iters);
        uint64_t t = fj_clock_ns(CLOCK_THREAD_CPUTIME_ID) - t0;
        best = t < best ? t : best;
    }
    return (double)iters * 1000.0 / (double)best;
}

/* CPU seconds the whole process uses per wall second while the team idles. */
static double idle_cpu_fraction(void)
{
    nxr_runtime_t *rt;
    nxr_ctx_t *ctx;
    if (open_runtime(&rt, &ctx) != 0)
        return NAN;
    bind_inside(nxr_ctx_domain(ctx));
    uint64_t iters = 0;
    for (int i = 0; i < 200; i++) { /* a stream, so the rhythm has a period */
        fj_spin_ns(50000);
        nxr_region(ctx, nxr_ctx_budget(ctx), iters);
    }
    nanosleep(&(struct timespec){.tv_nsec = 200 * 1000 * 1000}, NULL); /* past the window */
    uint64_t c0 = fj_clock_ns(CLOCK_PROCESS_CPUTIME_ID), w0 = fj_now();
    nanosleep(&(struct timespec){.tv_sec = 1}, NULL);
    double f = (double)(fj_clock_ns(CLOCK_PROCESS_CPUTIME_ID) - c0) / (double)(fj_now() - w0);
    nxr_ctx_destroy(ctx);
    nxr_runtime_destroy(rt);
    return f;
}

/* ---- the inside check: its cost on the region path --------------------------- */

/* Every operation asks whether the caller may run work itself
 * (nxr__exec_caller_inside, executor/placement.c): it reads the caller's
 * mask back, one system call. Measured in the same process against its
 * peer, the check it replaced (sched_getcpu, a vDSO read, and one bit test:
 * cheap, and wrong for a thread that widened its own mask), and against the
 * region it sits in front of (back to back, no work, chunks = budget). Each
 * figure is the median of 7 batches. */
struct inside_cost {
    double check_ns, old_check_ns, region_ns;
};

static double median7(double *v)
{
    qsort(v, 7, sizeof(*v), bench_cmp_double);
    return v[3];
}

volatile int forkjoin_inside_sink;

static struct inside_cost inside_check_cost(void)
{
    struct inside_cost r = {NAN, NAN, NAN};
    nxr_runtime_t *rt;
    nxr_ctx_t *ctx;
    if (open_runtime(&rt, &ctx) != 0)
        return r;
    bind_inside(nxr_ctx_domain(ctx));
    const struct nxr__exec *exec = &ctx->domain->exec;
    hwloc_const_bitmap_t cpus = exec->spec->cpus;
    const unsigned calls = 20000, regions = 2000, budget = nxr_ctx_budget(ctx);
    double check[7], old[7], region[7];
    for (int b = 0; b < 7; b++) {
        uint64_t t0 = fj_now();
        for (unsigned i = 0; i < calls; i++)
            forkjoin_inside_sink += nxr__exec_caller_inside(exec);
        uint64_t t1 = fj_now();
        for (unsigned i = 0; i < calls; i++) {
            int cpu = sched_getcpu();
            forkjoin_inside_sink += cpu >= 0 && hwloc_bitmap_isset(cpus, (unsigned)cpu);
        }
        uint64_t t2 = fj_now();
        for (unsigned i = 0; i < regions; i++)
            nxr_region(ctx, budget, 0);
        uint64_t t3 = fj_now();
        check[b] = (double)(t1 - t0) / calls;
        old[b] = (double)(t2 - t1) / calls;
        region[b] = (double)(t3 - t2) / regions;
    }
    r.check_ns = median7(check);
    r.old_check_ns = median7(old);
    r.region_ns = median7(region);
    nxr_ctx_destroy(ctx);
    nxr_runtime_destroy(rt);
    return r;
}

static void print_inside_cost(const struct inside_cost *c)
{
    printf("  inside check: %.0f ns per call (the sched_getcpu check it replaced: %.0f ns); a "
           "region (back to back, no work, chunks = budget): %.0f ns; the check is %.1f%% of a "
           "region, +%.1f%% over the old one\n",
           c->check_ns, c->old_check_ns, c->region_ns, 100 * c->check_ns / c->region_ns,
           100 * (c->check_ns - c->old_check_ns) / c->region_ns);
}

/* ---- the live counters: their cost on the region path ------------------------ */

static double median_of(double *v, int n);

/* One child's median region time for the one cell it measures, or NAN. */
static double child_cell_ns(const char *cmd)
{
    FILE *p = popen(cmd, "r");
    if (p == NULL)
        return NAN;
    char line[256];
    double ns = NAN;
    while (fgets(line, sizeof(line), p) != NULL) {
        unsigned long long work, median;
        unsigned ch;
        double cpu;
        if (sscanf(line, "cell %llu %u %llu %lf", &work, &ch, &median, &cpu) == 4)
            ns = (double)median;
    }
    return pclose(p) == 0 ? ns : NAN;
}

/* Counters on (this program's contender) against compiled out
 * (forkjoin_nocounters): back to back, no work, chunks = budget, one child
 * each per pair, the order alternated from pair to pair. The ratio is the
 * median of the pairs' on/off ratios (the two children of a pair run one
 * after the other, on the same machine's load); the times are medians. */
struct counter_cost {
    double on_ns, off_ns, ratio;
    int pairs;
};

static struct counter_cost counter_cost(const char *dir, const char *self, unsigned threads,
                                        double ipus, double scale, int pairs)
{
    struct counter_cost r = {NAN, NAN, NAN, 0};
    double on[ROUNDS], off[ROUNDS], ratio[ROUNDS];
    unsigned regions = (unsigned)(regions_per_gap[0] * scale);
    if (regions < 11)
        regions = 11;
    char args[256], cmd[2][PATH_MAX * 2 + 512];
    snprintf(args, sizeof(args),
             " --threads %u --gap-ns 0 --iters-per-us %.4f --regions %u --min-ms %u --cells 0:%u",
             threads, ipus, regions, (unsigned)(MIN_MS * scale), threads);
    snprintf(cmd[0], sizeof(cmd[0]), "'%s' --contender%s", self, args);
    snprintf(cmd[1], sizeof(cmd[1]), "'%s/forkjoin_nocounters' --contender%s", dir, args);
    for (int k = 0; k < pairs && k < ROUNDS; k++) {
        double t[2];
        for (int j = 0; j < 2; j++) {
            int which = (j + k) % 2; /* alternate which runs first */
            t[which] = child_cell_ns(cmd[which]);
        }
        if (isnan(t[0]) || isnan(t[1])) {
            fprintf(stderr, "forkjoin: the counter-cost pair %d did not run\n", k);
            return r;
        }
        on[r.pairs] = t[0];
        off[r.pairs] = t[1];
        ratio[r.pairs] = t[0] / t[1];
        r.pairs++;
    }
    r.on_ns = median_of(on, r.pairs);
    r.off_ns = median_of(off, r.pairs);
    r.ratio = median_of(ratio, r.pairs);
    return r;
}

static void print_counter_cost(const struct counter_cost *c)
{
    printf("  counters: %.0f ns per region on, %.0f ns compiled out (back to back, no work, "
           "chunks = budget); on/off %.3f, the median of %d alternated pairs\n",
           c->on_ns, c->off_ns, c->ratio, c->pairs);
}

struct result {
    double ns[ROUNDS];
    double cpu[ROUNDS];
    int n;
};

enum { QUIET, CONTENDED, MODES };
static struct result results[MODES][CONTENDERS][GAPS][WORKS][2];

static double median_of(double *v, int n)
{
    if (n == 0)
        return NAN;
    double s[ROUNDS];
    memcpy(s, v, (size_t)n * sizeof(*v));
    for (int i = 1; i < n; i++) {
        double x = s[i];
        int j = i;
        for (; j > 0 && s[j - 1] > x; j--)
            s[j] = s[j - 1];
        s[j] = x;
    }
    return n % 2 ? s[n / 2] : (s[n / 2 - 1] + s[n / 2]) / 2;
}

/* Runs one contender for one gap (all its cells) in a child process and
 * files its lines. Returns 0, or -1 when the program could not run. */
static int run_child(int mode, int who, const char *dir, const char *self, int gi, unsigned threads,
                     const unsigned *chunks, int nchunks, double ipus, double scale)
{
    char cells[256] = "", cmd[PATH_MAX * 2 + 512];
    for (int w = 0; w < WORKS; w++)
        for (int c = 0; c < nchunks; c++)
            snprintf(cells + strlen(cells), sizeof(cells) - strlen(cells), "%s%llu:%u",
                     cells[0] ? "," : "", (unsigned long long)works_ns[w], chunks[c]);
    unsigned regions = (unsigned)(regions_per_gap[gi] * scale);
    if (regions < 11)
        regions = 11;
    const char *env = who == GOMP || who == LIBOMP ? "OMP_PROC_BIND=close OMP_PLACES=cores " : "";
    if (who == NXR)
        snprintf(cmd, sizeof(cmd), "'%s' --contender", self);
    else
        snprintf(cmd, sizeof(cmd), "%s'%s/%s'", env, dir, programs[who]);
    snprintf(cmd + strlen(cmd), sizeof(cmd) - strlen(cmd),
             " --threads %u --gap-ns %llu --iters-per-us %.4f --regions %u --min-ms %u --cells %s",
             threads, (unsigned long long)gaps_ns[gi], ipus, regions,
             (unsigned)(MIN_MS * scale), cells);
    FILE *p = popen(cmd, "r");
    if (p == NULL)
        return -1;
    char line[256];
    int got = 0;
    while (fgets(line, sizeof(line), p) != NULL) {
        unsigned long long work, median;
        unsigned ch;
        double cpu;
        if (sscanf(line, "cell %llu %u %llu %lf", &work, &ch, &median, &cpu) != 4)
            continue;
        for (int w = 0; w < WORKS; w++)
            for (int c = 0; c < nchunks; c++)
                if (works_ns[w] == work && chunks[c] == ch) {
                    struct result *r = &results[mode][who][gi][w][c];
                    if (r->n < ROUNDS) {
                        r->ns[r->n] = (double)median;
                        r->cpu[r->n] = cpu;
                        r->n++;
                    }
                    got++;
                }
    }
    return pclose(p) == 0 && got > 0 ? 0 : -1;
}

int main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "--contender") == 0)
        return run_contender(argc - 1, argv + 1);
    bool json = false, quiet_only = false, counter_cost_only = false;
    int rounds = 3;
    double scale = 1.0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--json") == 0)
            json = true;
        else if (strcmp(argv[i], "--rounds") == 0 && i + 1 < argc)
            rounds = atoi(argv[++i]);
        else if (strcmp(argv[i], "--quiet-only") == 0)
            quiet_only = true;
        else if (strcmp(argv[i], "--short") == 0) {
            /* CI's bench stage: one round, few regions, quiet cells only. */
            rounds = 1;
            scale = 0.02;
            quiet_only = true;
        } else if (strcmp(argv[i], "--scale") == 0 && i + 1 < argc)
            scale = atof(argv[++i]);
        else if (strcmp(argv[i], "--counter-cost") == 0)
            counter_cost_only = true;
        else if (strcmp(argv[i], "--inside-check") == 0) {
            /* That row alone: no contenders, no sweep. */
            struct inside_cost c = inside_check_cost();
            print_inside_cost(&c);
            return 0;
        }
    }
    if (rounds < 1 || rounds > ROUNDS || !(scale > 0)) {
        fprintf(stderr, "forkjoin: --rounds 1..%d, --scale > 0\n", ROUNDS);
        return 2;
    }
    static char self[PATH_MAX], dir[PATH_MAX];
    ssize_t len = readlink("/proc/self/exe", self, sizeof(self) - 1);
    if (len <= 0)
        return 1;
    self[len] = '\0';
    snprintf(dir, sizeof(dir), "%s", self);
    char *slash = strrchr(dir, '/');
    if (slash != NULL)
        *slash = '\0';

    nxr_runtime_t *rt;
    nxr_ctx_t *ctx;
    if (open_runtime(&rt, &ctx) != 0)
        return 1;
    const unsigned threads = nxr_ctx_budget(ctx);
    hwloc_bitmap_t domain_cpus = hwloc_bitmap_dup(nxr_domain_cpuset(nxr_ctx_domain(ctx)));
    const int modes = quiet_only || hwloc_bitmap_weight(domain_cpus) < 2 ? 1 : MODES;
    nxr_ctx_destroy(ctx);
    nxr_runtime_destroy(rt);
    unsigned chunks[2] = {2, threads};
    int nchunks = threads == 2 ? 1 : 2;
    const double ipus = calibrate();
    if (counter_cost_only) {
        /* That row alone: --rounds pairs (9 unless given). */
        bool given = false;
        for (int i = 1; i < argc; i++)
            given = given || strcmp(argv[i], "--rounds") == 0;
        struct counter_cost cc = counter_cost(dir, self, threads, ipus, scale, given ? rounds : 9);
        if (json)
            printf("{\"counter_cost_on_ns\":%.0f,\"counter_cost_off_ns\":%.0f,"
                   "\"counter_cost_ratio\":%.4f,\"counter_cost_pairs\":%d}\n",
                   cc.on_ns, cc.off_ns, cc.ratio, cc.pairs);
        else
            print_counter_cost(&cc);
        hwloc_bitmap_free(domain_cpus);
        return cc.pairs > 0 ? 0 : 1;
    }

    bool missing[CONTENDERS] = {false};
    char busy_cpu[16] = "";
    for (int r = 0; r < rounds; r++) {
        for (int mode = 0; mode < modes; mode++) {
            struct svc_compete noise = {0};
            if (mode == CONTENDED) {
                int rc = svc_compete_start(&noise, domain_cpus, 1);
                if (rc != 0) {
                    fprintf(stderr, "forkjoin: no busy process: %s\n", nxr_strerror(rc));
                    return 1;
                }
                svc_compete_cpus(&noise, busy_cpu, sizeof(busy_cpu));
            }
            for (int gi = 0; gi < GAPS; gi++) {
                for (int k = 0; k < CONTENDERS; k++) {
                    int who = (k + r + gi) % CONTENDERS;
                    if (!missing[who] && run_child(mode, who, dir, self, gi, threads, chunks,
                                                   nchunks, ipus, scale) != 0) {
                        fprintf(stderr, "forkjoin: contender %s (%s) did not run\n",
                                names[who], programs[who]);
                        missing[who] = true;
                    }
                }
            }
            svc_compete_stop(&noise);
        }
    }
    hwloc_bitmap_free(domain_cpus);
    const double idle = idle_cpu_fraction();
    const struct inside_cost inside = inside_check_cost();
    const struct counter_cost counters = counter_cost(dir, self, threads, ipus, scale, rounds);

    static double all_ns[MODES][CONTENDERS][GAPS][WORKS][2], all_cpu[MODES][CONTENDERS][GAPS][WORKS][2];
    for (int mode = 0; mode < MODES; mode++)
        for (int who = 0; who < CONTENDERS; who++)
            for (int gi = 0; gi < GAPS; gi++)
                for (int w = 0; w < WORKS; w++)
                    for (int c = 0; c < nchunks; c++) {
                        struct result *res = &results[mode][who][gi][w][c];
                        all_ns[mode][who][gi][w][c] = median_of(res->ns, res->n);
                        all_cpu[mode][who][gi][w][c] = median_of(res->cpu, res->n);
                    }
    double(*ns)[GAPS][WORKS][2] = all_ns[QUIET];
    double(*cpu)[GAPS][WORKS][2] = all_cpu[QUIET];
    double(*cns)[GAPS][WORKS][2] = all_ns[CONTENDED];
    const int cb = nchunks - 1; /* chunks = budget */
    const double region_ratio = ns[NXR][0][0][cb] / ns[GOMP][0][0][cb];
    /* 2 x 10 us chunks back to back (chunks[0] is 2). */
    const double slowdown = cns[NXR][0][WORKS - 1][0] / ns[NXR][0][WORKS - 1][0];
    const double vs_gomp = cns[NXR][0][WORKS - 1][0] / cns[GOMP][0][WORKS - 1][0];

    if (json) {
        printf("{\"region_ratio\":%.3f,\"idle_cpu_fraction\":%.5f,\"inside_check_ns\":%.1f,"
               "\"inside_check_old_ns\":%.1f,\"inside_check_region_ns\":%.0f,"
               "\"counter_cost_on_ns\":%.0f,\"counter_cost_off_ns\":%.0f,"
               "\"counter_cost_ratio\":%.4f,\"sweep\":[",
               region_ratio, idle, inside.check_ns, inside.old_check_ns, inside.region_ns,
               counters.on_ns, counters.off_ns, counters.ratio);
        bool first = true;
        for (int gi = 0; gi < GAPS; gi++)
            for (int w = 0; w < WORKS; w++)
                for (int c = 0; c < nchunks; c++) {
                    printf("%s{\"gap_us\":%llu,\"work_ns\":%llu,\"chunks\":%u", first ? "" : ",",
                           (unsigned long long)(gaps_ns[gi] / 1000),
                           (unsigned long long)works_ns[w], chunks[c]);
                    for (int who = 0; who < CONTENDERS; who++)
                        printf(",\"%s_ns\":%.0f", names[who], ns[who][gi][w][c]);
                    for (int who = 0; who < CONTENDERS; who++)
                        printf(",\"%s_worker_cpu\":%.4f", names[who], cpu[who][gi][w][c]);
                    printf("}");
                    first = false;
                }
        printf("]");
        if (modes < MODES) {
            printf(",\"contended_cpu\":null,\"contended\":null,\"contended_slowdown\":null,"
                   "\"contended_vs_gomp\":null}\n");
            return 0;
        }
        printf(",\"contended_cpu\":%s,\"contended\":[", busy_cpu);
        first = true;
        for (int gi = 0; gi < GAPS; gi++)
            for (int w = 0; w < WORKS; w++)
                for (int c = 0; c < nchunks; c++) {
                    printf("%s{\"gap_us\":%llu,\"work_ns\":%llu,\"chunks\":%u", first ? "" : ",",
                           (unsigned long long)(gaps_ns[gi] / 1000),
                           (unsigned long long)works_ns[w], chunks[c]);
                    for (int who = 0; who < CONTENDERS; who++)
                        printf(",\"%s_ns\":%.0f", names[who], cns[who][gi][w][c]);
                    printf("}");
                    first = false;
                }
        printf("],\"contended_slowdown\":%.3f,\"contended_vs_gomp\":%.3f}\n", slowdown,
               vs_gomp);
        return 0;
    }
    printf("forkjoin: %u threads, %d rounds (contenders alternating, one child process each),\n"
           "  region time: median of the rounds' medians (ns); cpu: workers' CPU s per wall s\n",
           threads, rounds);
    printf("  %6s %6s %6s | %8s %8s %8s %8s | %8s %8s %8s | %6s %6s %6s %6s\n", "gap_us",
           "work", "chunks", "nxr", "gomp", "libomp", "tbb", "/gomp", "/libomp", "/tbb", "c.nxr",
           "c.gomp", "c.lomp", "c.tbb");
    for (int gi = 0; gi < GAPS; gi++)
        for (int w = 0; w < WORKS; w++)
            for (int c = 0; c < nchunks; c++) {
                double *n = (double[]){ns[NXR][gi][w][c], ns[GOMP][gi][w][c],
                                       ns[LIBOMP][gi][w][c], ns[TBB][gi][w][c]};
                printf("  %6llu %6llu %6u | %8.0f %8.0f %8.0f %8.0f | %8.2f %8.2f %8.2f | %6.3f "
                       "%6.3f %6.3f %6.3f\n",
                       (unsigned long long)(gaps_ns[gi] / 1000), (unsigned long long)works_ns[w],
                       chunks[c], n[0], n[1], n[2], n[3], n[0] / n[1], n[0] / n[2], n[0] / n[3],
                       cpu[NXR][gi][w][c], cpu[GOMP][gi][w][c], cpu[LIBOMP][gi][w][c],
                       cpu[TBB][gi][w][c]);
            }
    printf("  region_ratio (back to back, no work, nxr/gomp): %.2f; idle nxr team: %.3f%% of a "
           "core\n",
           region_ratio, idle * 100);
    print_inside_cost(&inside);
    print_counter_cost(&counters);
    if (modes < MODES) {
        printf("  contended: not measured (%s)\n",
               quiet_only ? "--quiet-only" : "the domain has one CPU");
        return 0;
    }
    printf("\ncontended: the same cells beside a busy process pinned to CPU %s (ns; x quiet)\n",
           busy_cpu);
    printf("  %6s %6s %6s | %8s %8s %8s %8s | %6s %6s %6s %6s | %8s\n", "gap_us", "work",
           "chunks", "nxr", "gomp", "libomp", "tbb", "x.nxr", "x.gomp", "x.lomp", "x.tbb",
           "nxr/gomp");
    for (int gi = 0; gi < GAPS; gi++)
        for (int w = 0; w < WORKS; w++)
            for (int c = 0; c < nchunks; c++) {
                printf("  %6llu %6llu %6u |", (unsigned long long)(gaps_ns[gi] / 1000),
                       (unsigned long long)works_ns[w], chunks[c]);
                for (int who = 0; who < CONTENDERS; who++)
                    printf(" %8.0f", cns[who][gi][w][c]);
                printf(" |");
                for (int who = 0; who < CONTENDERS; who++)
                    printf(" %6.2f", cns[who][gi][w][c] / ns[who][gi][w][c]);
                printf(" | %8.2f\n", cns[NXR][gi][w][c] / cns[GOMP][gi][w][c]);
            }
    printf("  contended_slowdown (nxr, 2 x 10 us chunks back to back, contended/quiet): %.2f; "
           "nxr/gomp contended: %.2f\n",
           slowdown, vs_gomp);
    return 0;
}
