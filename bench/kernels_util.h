/*
 * bench/kernels, shared by its sections (kernels.c, kernels_small.c): the
 * contender families and the settle between them, the clock, medians and
 * the pair ratio, aligned buffers, and native/OpenBLAS runtimes.
 */
#ifndef NXR_BENCH_KERNELS_UTIL_H
#define NXR_BENCH_KERNELS_UTIL_H

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "bench/timing.h"
#include "runtime/nxr.h"

enum family { FAM_NONE, FAM_OPENBLAS, FAM_NXR, FAM_OMP };

/* Sleep before switching to a contender of another family: long enough for
 * the previous family's threads to stop spinning. */
static const unsigned settle_ms[] = {
    [FAM_NONE] = 0,
    [FAM_OPENBLAS] = 150, /* OpenBLAS's server threads spin 2^28 TSC ticks, ~0.1 s */
    [FAM_NXR] = 20,       /* NXR_SPIN: ~0.1 ms */
    [FAM_OMP] = 20,       /* libgomp's default spin: a few ms at most */
};

extern enum family last_family; /* kernels.c */

static inline void settle(enum family next)
{
    if (last_family != FAM_NONE && last_family != next) {
        struct timespec ts = {.tv_sec = 0, .tv_nsec = (long)settle_ms[last_family] * 1000000L};
        nanosleep(&ts, NULL);
    }
    last_family = next;
}

/* Median over pairs of rounds (2i, 2i+1) of (num[2i] + num[2i+1]) /
 * (den[2i] + den[2i+1]); a last unpaired round is left out. reps >= 2. */
static inline double pair_ratio(const double *num, const double *den, int reps)
{
    int pairs = reps / 2;
    double *r = calloc((size_t)pairs, sizeof(double));
    for (int i = 0; i < pairs; i++)
        r[i] = (num[2 * i] + num[2 * i + 1]) / (den[2 * i] + den[2 * i + 1]);
    double m = bench_median(r, pairs);
    free(r);
    return m;
}

static inline void die(const char *what, int rc)
{
    fprintf(stderr, "kernels: %s: %s (%s)\n", what, nxr_strerror(rc), nxr_last_error());
    exit(1);
}

static inline float *alloc_floats(size_t n)
{
    float *p = aligned_alloc(64, (n * sizeof(float) + 63) / 64 * 64);
    if (p == NULL) {
        fprintf(stderr, "kernels: out of memory\n");
        exit(1);
    }
    return p;
}

/* A runtime on the default domains with `gemm` as its GEMM provider (NULL:
 * native) and `policy` (NXR_PROVIDER_POLICY_DEFAULT: the default, strict);
 * env ignored so that the caller's NXR_* cannot change the run. */
struct rt {
    nxr_runtime_t *rt;
    nxr_ctx_t *ctx;
};

static inline void rt_open(struct rt *r, nxr_provider_t *gemm, int policy)
{
    struct nxr_runtime_opts o;
    nxr_runtime_opts_init(&o);
    o.ignore_env = true;
    o.providers[NXR_FAMILY_GEMM] = gemm;
    o.provider_policy = policy;
    int rc = nxr_runtime_create(&o, &r->rt);
    if (rc != 0)
        die("runtime", rc);
    rc = nxr_ctx_create(r->rt, nxr_domain_id(nxr_runtime_domain_at(r->rt, 0)), &r->ctx);
    if (rc != 0)
        die("context", rc);
}

/* The native kernels on the default domains, capped at `threads`. */
static inline void rt_open_threads(struct rt *r, int threads)
{
    struct nxr_runtime_opts o;
    nxr_runtime_opts_init(&o);
    o.ignore_env = true;
    o.num_threads = threads;
    int rc = nxr_runtime_create(&o, &r->rt);
    if (rc != 0)
        die("runtime", rc);
    rc = nxr_ctx_create(r->rt, nxr_domain_id(nxr_runtime_domain_at(r->rt, 0)), &r->ctx);
    if (rc != 0)
        die("context", rc);
}

static inline void rt_close(struct rt *r)
{
    nxr_ctx_destroy(r->ctx);
    nxr_runtime_destroy(r->rt);
}

#endif /* NXR_BENCH_KERNELS_UTIL_H */
