/* The machine's GEMM peak and read bandwidth, measured (see machine.h). */
#include "service/machine.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "service/load.h"

#define GEMM_N 2048
#define READ_BYTES ((size_t)256 << 20)

/* What one measurement runs on: a context on the domain, its operands. */
struct probe {
    nxr_ctx_t *ctx;
    float *a, *b, *c;
    size_t n;
};

static int run_gemm(struct probe *p)
{
    struct nxr_sgemm_args g = {.m = p->n, .n = p->n, .k = p->n, .alpha = 1.0f, .a = p->a,
                          .lda = p->n, .b = p->b, .ldb = p->n, .beta = 0.0f, .c = p->c,
                          .ldc = p->n};
    return nxr_sgemm(p->ctx, &g);
}

static int run_read(struct probe *p)
{
    float sum;
    return nxr_sum(p->ctx, p->n, p->a, &sum);
}

/* Seconds of the fastest of at least two runs of `run`, repeated while the
 * budget lasts; -1 on its first failure (its status in *rc). */
static double fastest(int (*run)(struct probe *), struct probe *p, double budget_s, int *rc)
{
    double best = -1.0;
    const long long until = svc_now_ns() + (long long)(budget_s * 1e9);
    for (int reps = 0; reps < 2 || svc_now_ns() < until; reps++) {
        const long long t0 = svc_now_ns();
        if ((*rc = run(p)) != 0)
            return -1.0;
        const double s = (double)(svc_now_ns() - t0) / 1e9;
        if (best < 0 || s < best)
            best = s;
    }
    return best;
}

static void fill(float *x, size_t n)
{
    for (size_t i = 0; i < n; i++)
        x[i] = (float)(i % 251) / 251.0f - 0.5f;
}

/* One domain: GEMM for half the budget, then the read. */
static int measure_domain(nxr_runtime_t *rt, nxr_domain_t *d, double seconds,
                          double *gflops, double *gbs, char *err, size_t errsz)
{
    struct probe p = {0};
    int rc = nxr_ctx_create(rt, nxr_domain_id(d), &p.ctx);
    if (rc != 0) {
        snprintf(err, errsz, "context on domain %d: %s", nxr_domain_id(d), nxr_strerror(rc));
        return rc;
    }
    const size_t nn = (size_t)GEMM_N * GEMM_N;
    const char *what = "GEMM operands";
    if ((rc = nxr_domain_malloc(d, nn * sizeof(float), 64, (void **)&p.a)) == 0 &&
        (rc = nxr_domain_malloc(d, nn * sizeof(float), 64, (void **)&p.b)) == 0 &&
        (rc = nxr_domain_malloc(d, nn * sizeof(float), 64, (void **)&p.c)) == 0) {
        fill(p.a, nn);
        fill(p.b, nn);
        p.n = GEMM_N;
        what = "SGEMM 2048";
        double s = fastest(run_gemm, &p, seconds / 2, &rc);
        if (rc == 0)
            *gflops = 2.0 * (double)nn * GEMM_N / s / 1e9;
    }
    nxr_domain_free(p.a);
    nxr_domain_free(p.b);
    nxr_domain_free(p.c);
    p.a = p.b = p.c = NULL;
    if (rc == 0) {
        what = "the read buffer";
        if ((rc = nxr_domain_malloc(d, READ_BYTES, 64, (void **)&p.a)) == 0) {
            p.n = READ_BYTES / sizeof(float);
            fill(p.a, p.n); /* first touch: the pages on the domain's node */
            what = "the streaming read";
            double s = fastest(run_read, &p, seconds / 2, &rc);
            if (rc == 0)
                *gbs = (double)READ_BYTES / s / 1e9;
        }
        nxr_domain_free(p.a);
    }
    if (rc != 0)
        snprintf(err, errsz, "%s on domain %d: %s", what, nxr_domain_id(d),
                 nxr_last_error()[0] ? nxr_last_error() : nxr_strerror(rc));
    nxr_ctx_destroy(p.ctx);
    return rc;
}

int svc_machine_measure(nxr_runtime_t *rt, double seconds, struct svc_machine *out, char *err,
                        size_t errsz)
{
    memset(out, 0, sizeof(*out));
    if (rt == NULL || seconds < 0)
        return -EINVAL;
    const size_t n = nxr_runtime_domain_count(rt);
    for (size_t i = 0; i < n; i++) {
        double gflops = 0, gbs = 0;
        int rc = measure_domain(rt, nxr_runtime_domain_at(rt, i), seconds / (double)n, &gflops,
                                &gbs, err, errsz);
        if (rc != 0) {
            memset(out, 0, sizeof(*out));
            return rc;
        }
        out->gemm_peak_gflops += gflops;
        out->read_gbs += gbs;
        out->domains++;
    }
    return 0;
}
