/*
 * bench/forkjoin: nxr's fork-join engine against OpenMP (libgomp) in the same
 * process and run, with pinned threads on the same CPUs.
 *
 *   (a) an empty parallel region over the domain: nxr_parallel_for with one
 *       chunk per thread vs `#pragma omp parallel for` with the same count;
 *   (b) a barrier-like round trip: nxr's raw team region (no loop machinery)
 *       vs `#pragma omp barrier` inside a running OpenMP region;
 *   (c) CPU time an idle team uses per wall second after its spin window;
 *   (d) region time while another process spins on the same CPUs;
 *   (e) a sweep of the spin bound (region time and idle CPU per setting), the
 *       measurement behind NXR_SPIN's default.
 *
 * Medians of batch means; ratios are nxr/OpenMP (lower is better for nxr).
 * `--json` prints one object. OMP_PROC_BIND=close and OMP_WAIT_POLICY are set
 * by re-executing itself, because libgomp reads them when it loads.
 */
#include <errno.h>
#include <omp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "domains/internal/cpuset.h"
#include "runtime/internal/runtime.h"

#define BATCH   200
#define BATCHES 51

static double now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static double cpu_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof(*v), cmp_double);
    return v[n / 2];
}

static volatile unsigned sink;

static void empty_body(void *arg, size_t b, size_t e, unsigned worker)
{
    (void)arg;
    sink = (unsigned)(b + e + worker);
}

static void empty_region(void *arg, unsigned p, unsigned n)
{
    (void)arg;
    sink = p + n;
}

static double nxr_region_ns(nxr_ctx_t *ctx, unsigned threads)
{
    double t[BATCHES];
    for (int k = 0; k < BATCHES; k++) {
        double t0 = now_ns();
        for (int i = 0; i < BATCH; i++)
            nxr_parallel_for(ctx, 0, threads, 1, empty_body, NULL);
        t[k] = (now_ns() - t0) / BATCH;
    }
    return median(t, BATCHES);
}

static double nxr_roundtrip_ns(struct nxr__team *team, unsigned threads)
{
    double t[BATCHES];
    for (int k = 0; k < BATCHES; k++) {
        double t0 = now_ns();
        for (int i = 0; i < BATCH; i++)
            nxr__team_run(team, empty_region, NULL, threads, true);
        t[k] = (now_ns() - t0) / BATCH;
    }
    return median(t, BATCHES);
}

static double omp_region_ns(unsigned threads)
{
    double t[BATCHES];
    for (int k = 0; k < BATCHES; k++) {
        double t0 = now_ns();
        for (int i = 0; i < BATCH; i++) {
#pragma omp parallel for num_threads(threads) schedule(static)
            for (unsigned j = 0; j < threads; j++)
                sink = j;
        }
        t[k] = (now_ns() - t0) / BATCH;
    }
    return median(t, BATCHES);
}

static double omp_barrier_ns(unsigned threads)
{
    double t[BATCHES];
#pragma omp parallel num_threads(threads)
    {
        for (int k = 0; k < BATCHES; k++) {
            double t0 = 0;
#pragma omp barrier
#pragma omp master
            t0 = now_ns();
            for (int i = 0; i < BATCH; i++) {
#pragma omp barrier
            }
#pragma omp master
            t[k] = (now_ns() - t0) / BATCH;
        }
    }
    return median(t, BATCHES);
}

/* CPU seconds the whole process uses per wall second while idle. */
static double idle_cpu_fraction(double seconds)
{
    nanosleep(&(struct timespec){.tv_nsec = 100 * 1000 * 1000}, NULL); /* past the spin window */
    double c0 = cpu_seconds(), w0 = now_ns();
    struct timespec ts = {.tv_sec = (time_t)seconds,
                          .tv_nsec = (long)((seconds - (double)(time_t)seconds) * 1e9)};
    nanosleep(&ts, NULL);
    return (cpu_seconds() - c0) / ((now_ns() - w0) / 1e9);
}

/* A process that spins on the given CPUs until killed. */
static pid_t start_spinner(hwloc_const_bitmap_t cpus)
{
    pid_t pid = fork();
    if (pid == 0) {
        cpu_set_t set;
        CPU_ZERO(&set);
        int cpu;
        hwloc_bitmap_foreach_begin(cpu, cpus) CPU_SET(cpu, &set);
        hwloc_bitmap_foreach_end();
        sched_setaffinity(0, sizeof(set), &set);
        for (;;)
            sink++;
    }
    return pid;
}

static int open_runtime(nxr_runtime_t **rt, nxr_ctx_t **ctx, int spin)
{
    struct nxr_runtime_opts o;
    nxr_runtime_opts_init(&o);
    o.spin = spin;
    int rc = nxr_runtime_create(rt, &o);
    if (rc == 0)
        rc = nxr_ctx_create(ctx, *rt, nxr_domain_id(nxr_runtime_domain_at(*rt, 0)));
    if (rc != 0)
        fprintf(stderr, "forkjoin: %s\n", nxr_strerror(rc));
    return rc;
}

int main(int argc, char **argv)
{
    bool json = argc > 1 && strcmp(argv[1], "--json") == 0;
    const char *saved = getenv("NXR_BENCH_AFFINITY");
    if (saved == NULL) {
        /* libgomp reads its settings when it loads: re-run with them set.
         * It also binds the initial thread then, so the original affinity
         * travels along and is restored before nxr reads it. */
        cpu_set_t set;
        char list[4096] = "";
        sched_getaffinity(0, sizeof(set), &set);
        for (int cpu = 0; cpu < CPU_SETSIZE; cpu++) {
            if (CPU_ISSET(cpu, &set))
                snprintf(list + strlen(list), sizeof(list) - strlen(list), "%d,", cpu);
        }
        setenv("NXR_BENCH_AFFINITY", list, 1);
        setenv("OMP_PROC_BIND", "close", 1);
        setenv("OMP_PLACES", "cores", 1);
        execv("/proc/self/exe", argv);
        perror("forkjoin: re-exec");
        return 1;
    }
    cpu_set_t original;
    CPU_ZERO(&original);
    for (const char *p = saved; *p != '\0';) {
        char *end;
        long cpu = strtol(p, &end, 10);
        if (end == p)
            break;
        CPU_SET((int)cpu, &original);
        p = *end == ',' ? end + 1 : end;
    }
    sched_setaffinity(0, sizeof(original), &original);
    nxr_runtime_t *rt;
    nxr_ctx_t *ctx;
    if (open_runtime(&rt, &ctx, -1) != 0)
        return 1;
    const nxr_domain_t *d = nxr_ctx_domain(ctx);
    unsigned threads = nxr_domain_budget(d);
    struct nxr__team *team = ((struct nxr_domain *)d)->team;
    /* The benchmark's own thread runs inside the domain, as a service
     * thread pinned to its socket would. */
    struct nxr__cpumask mask;
    nxr__cpumask_from_bitmap(&mask, nxr_domain_cpuset(d));
    sched_setaffinity(0, mask.size, mask.set);
    nxr__cpumask_free(&mask);

    /* Warm both up. */
    nxr_region_ns(ctx, threads);
    omp_region_ns(threads);

    double nxr_region = nxr_region_ns(ctx, threads);
    double omp_region = omp_region_ns(threads);
    double nxr_barrier = nxr_roundtrip_ns(team, threads);
    double omp_barrier = omp_barrier_ns(threads);
    double idle = idle_cpu_fraction(1.0);

    pid_t spinner = start_spinner(nxr_domain_cpuset(d));
    double contended = nxr_region_ns(ctx, threads);
    double omp_contended = omp_region_ns(threads);
    kill(spinner, SIGKILL);
    waitpid(spinner, NULL, 0);
    nxr_ctx_destroy(ctx);
    nxr_runtime_destroy(rt);

    static const int spins[] = {0, 256, 4096, 65536};
    double sweep_region[4], sweep_idle[4];
    for (int i = 0; i < 4; i++) {
        if (open_runtime(&rt, &ctx, spins[i]) != 0)
            return 1;
        nxr_region_ns(ctx, threads);
        sweep_region[i] = nxr_region_ns(ctx, threads);
        sweep_idle[i] = idle_cpu_fraction(0.3);
        nxr_ctx_destroy(ctx);
        nxr_runtime_destroy(rt);
    }

    if (json) {
        printf(
            "{\"threads\":%u,\"nxr_region_ns\":%.1f,\"omp_region_ns\":%.1f,\"region_ratio\":%.3f,"
            "\"nxr_barrier_ns\":%.1f,\"omp_barrier_ns\":%.1f,\"idle_cpu_fraction\":%.5f,"
            "\"contended_region_ns\":%.1f,\"omp_contended_region_ns\":%.1f,"
            "\"contended_slowdown\":%.3f,\"spin_sweep\":[",
            threads, nxr_region, omp_region, nxr_region / omp_region, nxr_barrier, omp_barrier,
            idle, contended, omp_contended, contended / nxr_region);
        for (int i = 0; i < 4; i++)
            printf("%s{\"spin\":%d,\"region_ns\":%.1f,\"idle_cpu_fraction\":%.5f}", i ? "," : "",
                   spins[i], sweep_region[i], sweep_idle[i]);
        printf("]}\n");
        return 0;
    }
    printf("forkjoin: %u threads, medians of %d batches of %d\n", threads, BATCHES, BATCH);
    printf("  %-34s %10s %10s %8s\n", "", "nxr", "OpenMP", "nxr/omp");
    printf("  %-34s %10.0f %10.0f %8.2f\n", "empty region (ns)", nxr_region, omp_region,
           nxr_region / omp_region);
    printf("  %-34s %10.0f %10.0f %8.2f\n", "round trip / barrier (ns)", nxr_barrier, omp_barrier,
           nxr_barrier / omp_barrier);
    printf("  %-34s %10.0f %10.0f %8.2f\n", "region, competing spinner (ns)", contended,
           omp_contended, contended / omp_contended);
    printf("  idle team CPU: %.3f%% of a core; region slowdown under a spinner: %.2fx\n",
           idle * 100, contended / nxr_region);
    printf("  spin sweep (NXR_SPIN):");
    for (int i = 0; i < 4; i++)
        printf("  %d: %.0f ns, idle %.2f%%", spins[i], sweep_region[i], sweep_idle[i] * 100);
    printf("\n");
    return 0;
}
