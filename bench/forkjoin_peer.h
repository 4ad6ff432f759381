/*
 * bench/forkjoin's contender side: the measurement loop every contender
 * program runs (nxr, libgomp, LLVM libomp, oneTBB), so that all of them are
 * timed by the same code, compiled from the same source by their own
 * compiler (gcc, clang, g++). Header-only on purpose: the libomp contender
 * is built by clang outside the project's toolchain.
 *
 * A contender is run as a child process by bench/forkjoin:
 *   <program> --threads T --gap-ns G --iters-per-us I --regions R --min-ms M
 *             --cells W:C,W:C,...
 * and prints one line per cell: "cell <work_ns> <chunks> <median_ns> <worker_cpu>".
 * Run alone (CI's bench stage), `<program> --short [--json]` measures two
 * cells (no work and 1 us per chunk, one chunk per online CPU) with
 * defaults for the rest, and --json prints the cells as one JSON object:
 * {"cells": [{"work_ns", "chunks", "median_ns", "worker_cpu"}]}.
 *
 * A cell repeats, at least R times and for at least M ms (the kernel adds
 * other threads' CPU time to the process clock only at ticks and switches:
 * short windows misreport it): the calling thread spins for the gap (serial
 * work, as a service does between requests), then times one region of
 * `chunks` chunks of `work_ns` each. Worker CPU is the process's CPU time
 * minus the calling thread's, per wall second of the cell (gaps included).
 */
#ifndef NXR_BENCH_FORKJOIN_PEER_H
#define NXR_BENCH_FORKJOIN_PEER_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define FJ_MAX_CELLS   32
#define FJ_WARMUP      20
#define FJ_MAX_REGIONS 1000000u

struct fj_args {
    unsigned threads;
    uint64_t gap_ns;
    double iters_per_us;
    unsigned regions;
    unsigned min_ms;
    unsigned ncells;
    uint64_t work_ns[FJ_MAX_CELLS];
    unsigned chunks[FJ_MAX_CELLS];
    int json; /* print the cells as one JSON object */
};

static inline uint64_t fj_clock_ns(clockid_t clock)
{
    struct timespec ts;
    clock_gettime(clock, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static inline uint64_t fj_now(void)
{
    return fj_clock_ns(CLOCK_MONOTONIC);
}

/* The work of one chunk: a dependent multiply-add chain the compiler can
 * neither vectorise nor fold (the empty asm hides x from it each step). */
static inline uint64_t fj_work(uint64_t iters)
{
    uint64_t x = iters | 1;
    for (uint64_t i = 0; i < iters; i++) {
        x = x * 6364136223846793005u + 1442695040888963407u;
        __asm__ volatile("" : "+r"(x));
    }
    return x;
}

static inline void fj_spin_ns(uint64_t ns)
{
    if (ns == 0)
        return;
    uint64_t until = fj_now() + ns;
    while (fj_now() < until)
        __asm__ volatile("pause");
}

static int fj_cmp(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

/* Parses the command line above; returns 0 or prints a message and -1. */
static inline int fj_parse(int argc, char **argv, struct fj_args *a)
{
    memset(a, 0, sizeof(*a));
    for (int i = 1; i < argc; i++) {
        const char *k = argv[i];
        if (strcmp(k, "--json") == 0) {
            a->json = 1;
            continue;
        }
        if (strcmp(k, "--short") == 0) {
            long cpus = sysconf(_SC_NPROCESSORS_ONLN);
            a->threads = cpus > 0 ? (unsigned)cpus : 1u;
            a->iters_per_us = 100.0; /* uncalibrated: the cells' work is nominal */
            a->regions = 50;
            a->ncells = 2;
            a->work_ns[0] = 0;
            a->work_ns[1] = 1000;
            a->chunks[0] = a->chunks[1] = a->threads;
            continue;
        }
        if (i + 1 >= argc)
            break;
        const char *v = argv[++i];
        if (strcmp(k, "--threads") == 0)
            a->threads = (unsigned)strtoul(v, NULL, 10);
        else if (strcmp(k, "--gap-ns") == 0)
            a->gap_ns = strtoull(v, NULL, 10);
        else if (strcmp(k, "--iters-per-us") == 0)
            a->iters_per_us = strtod(v, NULL);
        else if (strcmp(k, "--regions") == 0)
            a->regions = (unsigned)strtoul(v, NULL, 10);
        else if (strcmp(k, "--min-ms") == 0)
            a->min_ms = (unsigned)strtoul(v, NULL, 10);
        else if (strcmp(k, "--cells") == 0) {
            for (const char *p = v; *p != '\0' && a->ncells < FJ_MAX_CELLS;) {
                char *end;
                a->work_ns[a->ncells] = strtoull(p, &end, 10);
                if (*end != ':')
                    break;
                a->chunks[a->ncells] = (unsigned)strtoul(end + 1, &end, 10);
                a->ncells++;
                p = *end == ',' ? end + 1 : end;
            }
        }
    }
    if (a->threads == 0 || a->regions == 0 || a->regions > FJ_MAX_REGIONS || a->ncells == 0 ||
        a->iters_per_us <= 0) {
        fprintf(stderr,
                "usage: %s --threads T --gap-ns G --iters-per-us I --regions R "
                "--cells W:C,... [--json] | --short [--json]\n",
                argv[0]);
        return -1;
    }
    return 0;
}

/* Runs every cell with region(ctx, chunks, iters) and prints its line. */
static inline void fj_run(const struct fj_args *a, void (*region)(void *ctx, unsigned chunks,
                                                                  uint64_t iters),
                          void *ctx)
{
    uint64_t *t = (uint64_t *)malloc(FJ_MAX_REGIONS * sizeof(*t));
    for (unsigned c = 0; c < a->ncells; c++) {
        const uint64_t iters = (uint64_t)(a->iters_per_us * (double)a->work_ns[c] / 1000.0);
        for (unsigned r = 0; r < FJ_WARMUP; r++) {
            fj_spin_ns(a->gap_ns);
            region(ctx, a->chunks[c], iters);
        }
        const uint64_t p0 = fj_clock_ns(CLOCK_PROCESS_CPUTIME_ID);
        const uint64_t s0 = fj_clock_ns(CLOCK_THREAD_CPUTIME_ID);
        const uint64_t w0 = fj_now();
        const uint64_t until = w0 + (uint64_t)a->min_ms * 1000000u;
        unsigned n = 0;
        while (n < FJ_MAX_REGIONS && (n < a->regions || fj_now() < until)) {
            fj_spin_ns(a->gap_ns);
            uint64_t t0 = fj_now();
            region(ctx, a->chunks[c], iters);
            t[n++] = fj_now() - t0;
        }
        const uint64_t w1 = fj_now();
        const uint64_t s1 = fj_clock_ns(CLOCK_THREAD_CPUTIME_ID);
        const uint64_t p1 = fj_clock_ns(CLOCK_PROCESS_CPUTIME_ID);
        qsort(t, n, sizeof(*t), fj_cmp);
        const double workers = (double)((p1 - p0) - (s1 - s0)) / (double)(w1 - w0);
        if (a->json)
            printf("%s{\"work_ns\":%llu,\"chunks\":%u,\"median_ns\":%llu,\"worker_cpu\":%.4f}",
                   c == 0 ? "{\"cells\":[" : ",", (unsigned long long)a->work_ns[c], a->chunks[c],
                   (unsigned long long)t[n / 2], workers);
        else
            printf("cell %llu %u %llu %.4f\n", (unsigned long long)a->work_ns[c], a->chunks[c],
                   (unsigned long long)t[n / 2], workers);
        fflush(stdout);
    }
    if (a->json)
        printf("]}\n");
    free(t);
}

#endif /* NXR_BENCH_FORKJOIN_PEER_H */
