/*
 * bench/service: many small requests on one domain, the shape of a model
 * service. C client threads (default 4, unpinned, as a service's request
 * threads are) each send R requests, one at a time, to the runtime's first
 * domain. A request is a small MLP: y = (gelu(x W1 + b1)) W2 + b2 with x of
 * B x D (default 4 x 256) and a hidden width of H (default 1024), weights
 * on the domain (nxr_domain_malloc), activations in the request's own scope.
 *
 * Ways to run one request, measured in the same process, interleaved
 * round by round (each round runs every way once, in a rotating order):
 *   inner  the client calls the kernels itself through its own context:
 *          each kernel fans out over the domain (INNER), so the clients'
 *          regions take turns on the one team;
 *   tasks  the client submits the request as one task (nxr_submit +
 *          nxr_job_wait on its own context): each request runs on one worker,
 *          its kernels sequential in place (OUTER), so requests run side by
 *          side, as runtime/nxr_ctx.h advises for many small requests;
 *   fused  tasks, with the layers as nxr_sgemm_fused (bias + GELU in the
 *          GEMM's write-back) and the output bias as nxr_binary_rows;
 *          inner and tasks use the bias repeated per row (nxr_binary) and
 *          nxr_unary, which every nxr version has.
 * Printed per way: requests/s over all clients, p50 and p99 latency of one
 * request (send to answer), each the median over rounds; and each way's
 * requests/s as a ratio to inner's in the same rounds.
 *
 *   bazel run //bench:service -- [--json] [--clients C] [--requests R]
 *                                [--rounds N] [--batch B] [--dim D] [--hidden H]
 *                                [--short]   (2 clients, 40 requests, 1 round: CI)
 * NXR_DOMAINS / NXR_NUM_THREADS apply (the environment is honoured).
 * Built with -DNXR_SERVICE_BENCH_OLD_API it leaves "fused" out, so the same
 * file measures an nxr from before nxr_sgemm_fused existed.
 */
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench/timing.h"
#include "runtime/nxr.h"

enum way { WAY_INNER, WAY_TASKS, WAY_FUSED, WAY_COUNT };

#if defined(NXR_SERVICE_BENCH_OLD_API)
#define WAYS 2
#else
#define WAYS 3
#endif

static const char *const way_names[WAY_COUNT] = {"inner", "tasks", "fused"};

struct config {
    int clients, requests, rounds;
    size_t batch, dim, hidden;
    bool json;
};

struct model {
    float *w1, *b1, *b1_rows, *w2, *b2, *b2_rows; /* *_rows: bias repeated per row */
};

struct client {
    const struct config *cfg;
    const struct model *model;
    nxr_ctx_t *ctx;
    nxr_scope_t *scope;
    float *x, *y;
    enum way way;
    double *lat_us; /* one per request */
    int status;
};

/* The q-quantile of v[0..n) (sorts v). */
static double quantile(double *v, size_t n, double q)
{
    qsort(v, n, sizeof(*v), bench_cmp_double);
    size_t i = (size_t)(q * (double)(n - 1) + 0.5);
    return v[i < n ? i : n - 1];
}

/* One request on ctx: the MLP, with h from the client's scope. */
static int mlp(struct client *c)
{
    const struct config *cfg = c->cfg;
    const struct model *m = c->model;
    size_t B = cfg->batch, D = cfg->dim, H = cfg->hidden;
    float *h;
    int rc = nxr_scope_alloc(c->scope, B * H * sizeof(float), (void **)&h);
    if (rc != 0)
        return rc;
    struct nxr_sgemm_args l1 = {.m = B, .n = H, .k = D, .alpha = 1, .a = c->x, .lda = D,
                           .b = m->w1, .ldb = H, .c = h, .ldc = H};
    struct nxr_sgemm_args l2 = {.m = B, .n = D, .k = H, .alpha = 1, .a = h, .lda = H,
                           .b = m->w2, .ldb = D, .c = c->y, .ldc = D};
#if !defined(NXR_SERVICE_BENCH_OLD_API)
    if (c->way == WAY_FUSED) {
        struct nxr_sgemm_epilogue e1 = {.bias = m->b1, .activation = NXR_ACTIVATION_GELU_TANH};
        if ((rc = nxr_sgemm_fused(c->ctx, &l1, &e1)) == 0 && (rc = nxr_sgemm(c->ctx, &l2)) == 0)
            rc = nxr_binary_rows(c->ctx, NXR_BINARY_ADD, B, D, c->y, D, m->b2, c->y, D);
        nxr_scope_reset(c->scope);
        return rc;
    }
#endif
    if ((rc = nxr_sgemm(c->ctx, &l1)) == 0 &&
        (rc = nxr_binary(c->ctx, NXR_BINARY_ADD, B * H, h, m->b1_rows, h)) == 0 &&
        (rc = nxr_unary(c->ctx, NXR_UNARY_GELU_TANH, B * H, h, h)) == 0 &&
        (rc = nxr_sgemm(c->ctx, &l2)) == 0)
        rc = nxr_binary(c->ctx, NXR_BINARY_ADD, B * D, c->y, m->b2_rows, c->y);
    nxr_scope_reset(c->scope);
    return rc;
}

static int request_task(void *arg, size_t index)
{
    (void)index;
    return mlp(arg);
}

static int one_request(struct client *c)
{
    if (c->way == WAY_INNER)
        return mlp(c);
    nxr_job_t *job;
    int rc = nxr_submit(c->ctx, 1, request_task, c, &job);
    return rc != 0 ? rc : nxr_job_wait(job);
}

/* All clients start together. */
static pthread_barrier_t start;

static void *client_main(void *arg)
{
    struct client *c = arg;
    pthread_barrier_wait(&start);
    for (int i = 0; i < c->cfg->requests && c->status == 0; i++) {
        double t0 = bench_now();
        c->status = one_request(c);
        c->lat_us[i] = (bench_now() - t0) * 1e6;
    }
    return NULL;
}

struct round_result {
    double rps, p50_us, p99_us;
};

static int run_round(struct client *cl, const struct config *cfg, enum way way,
                     struct round_result *out)
{
    pthread_t th[64];
    pthread_barrier_init(&start, NULL, (unsigned)cfg->clients + 1);
    for (int i = 0; i < cfg->clients; i++) {
        cl[i].way = way;
        cl[i].status = 0;
        pthread_create(&th[i], NULL, client_main, &cl[i]);
    }
    pthread_barrier_wait(&start);
    double t0 = bench_now();
    for (int i = 0; i < cfg->clients; i++)
        pthread_join(th[i], NULL);
    double wall = bench_now() - t0;
    pthread_barrier_destroy(&start);
    size_t n = (size_t)cfg->clients * (size_t)cfg->requests;
    double *all = malloc(n * sizeof(*all));
    for (int i = 0; i < cfg->clients; i++) {
        if (cl[i].status != 0) {
            fprintf(stderr, "service: %s: client %d: %s\n", way_names[way], i,
                    nxr_strerror(cl[i].status));
            free(all);
            return cl[i].status;
        }
        memcpy(all + (size_t)i * (size_t)cfg->requests, cl[i].lat_us,
               (size_t)cfg->requests * sizeof(double));
    }
    out->rps = (double)n / wall;
    out->p50_us = quantile(all, n, 0.50);
    out->p99_us = quantile(all, n, 0.99);
    free(all);
    return 0;
}

static float *domain_floats(nxr_domain_t *d, size_t n, float scale, unsigned seed)
{
    float *p;
    if (nxr_domain_malloc(d, n * sizeof(float), 64, (void **)&p) != 0)
        return NULL;
    for (size_t i = 0; i < n; i++) {
        seed = seed * 1103515245u + 12345u;
        p[i] = scale * ((float)(seed >> 8 & 0xffff) / 65536.0f - 0.5f);
    }
    return p;
}

static int parse(int argc, char **argv, struct config *cfg)
{
    *cfg = (struct config){.clients = 4, .requests = 400, .rounds = 5, .batch = 4, .dim = 256,
                           .hidden = 1024};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(a, "--json") == 0) {
            cfg->json = true;
            continue;
        }
        if (strcmp(a, "--short") == 0) { /* CI's bench stage: a few requests, one round */
            cfg->clients = 2;
            cfg->requests = 40;
            cfg->rounds = 1;
            continue;
        }
        if (v == NULL)
            return -1;
        i++;
        if (strcmp(a, "--clients") == 0)
            cfg->clients = atoi(v);
        else if (strcmp(a, "--requests") == 0)
            cfg->requests = atoi(v);
        else if (strcmp(a, "--rounds") == 0)
            cfg->rounds = atoi(v);
        else if (strcmp(a, "--batch") == 0)
            cfg->batch = (size_t)atoi(v);
        else if (strcmp(a, "--dim") == 0)
            cfg->dim = (size_t)atoi(v);
        else if (strcmp(a, "--hidden") == 0)
            cfg->hidden = (size_t)atoi(v);
        else
            return -1;
    }
    if (cfg->clients < 1 || cfg->clients > 64 || cfg->requests < 1 || cfg->rounds < 1 ||
        cfg->batch < 1 || cfg->dim < 1 || cfg->hidden < 1)
        return -1;
    return 0;
}

static double median(double *v, int n)
{
    return quantile(v, (size_t)n, 0.5);
}

int main(int argc, char **argv)
{
    struct config cfg;
    if (parse(argc, argv, &cfg) != 0) {
        fprintf(stderr,
                "usage: service [--json] [--short] [--clients C] [--requests R] [--rounds N] "
                "[--batch B] [--dim D] [--hidden H]\n");
        return 2;
    }
    nxr_runtime_t *rt;
    struct nxr_runtime_opts o;
    nxr_runtime_opts_init(&o);
    int rc = nxr_runtime_create(&o, &rt);
    if (rc != 0) {
        fprintf(stderr, "service: %s: %s\n", nxr_strerror(rc), nxr_last_error());
        return 1;
    }
    nxr_domain_t *d = nxr_runtime_domain_at(rt, 0);
    size_t B = cfg.batch, D = cfg.dim, H = cfg.hidden;
    struct model m = {
        .w1 = domain_floats(d, D * H, 0.1f, 1),
        .b1 = domain_floats(d, H, 1.0f, 2),
        .w2 = domain_floats(d, H * D, 0.1f, 3),
        .b2 = domain_floats(d, D, 1.0f, 4),
        .b1_rows = domain_floats(d, B * H, 1.0f, 5),
        .b2_rows = domain_floats(d, B * D, 1.0f, 6),
    };
    for (size_t r = 0; r < B; r++) { /* the repeated biases are the biases */
        memcpy(m.b1_rows + r * H, m.b1, H * sizeof(float));
        memcpy(m.b2_rows + r * D, m.b2, D * sizeof(float));
    }
    struct client cl[64];
    for (int i = 0; i < cfg.clients; i++) {
        cl[i] = (struct client){.cfg = &cfg, .model = &m};
        if ((rc = nxr_ctx_create(rt, nxr_domain_id(d), &cl[i].ctx)) != 0 ||
            (rc = nxr_scope_create(d, NULL, &cl[i].scope)) != 0) {
            fprintf(stderr, "service: %s\n", nxr_strerror(rc));
            return 1;
        }
        cl[i].x = domain_floats(d, B * D, 1.0f, 10 + (unsigned)i);
        cl[i].y = domain_floats(d, B * D, 0.0f, 0);
        cl[i].lat_us = malloc((size_t)cfg.requests * sizeof(double));
        /* Warm the scope on this thread (its first chunk). */
        void *warm;
        nxr_scope_alloc(cl[i].scope, B * H * sizeof(float), &warm);
        nxr_scope_reset(cl[i].scope);
    }
    double rps[WAY_COUNT][64], p50[WAY_COUNT][64], p99[WAY_COUNT][64], ratio[WAY_COUNT][64];
    int rounds = cfg.rounds < 64 ? cfg.rounds : 64;
    /* One warm-up round per way, not counted. */
    struct round_result res;
    for (int w = 0; w < WAYS; w++)
        if ((rc = run_round(cl, &cfg, (enum way)w, &res)) != 0)
            return 1;
    for (int r = 0; r < rounds; r++) {
        for (int k = 0; k < WAYS; k++) {
            int w = (r + k) % WAYS; /* rotate the order */
            if ((rc = run_round(cl, &cfg, (enum way)w, &res)) != 0)
                return 1;
            rps[w][r] = res.rps;
            p50[w][r] = res.p50_us;
            p99[w][r] = res.p99_us;
        }
        for (int w = 0; w < WAYS; w++)
            ratio[w][r] = rps[w][r] / rps[WAY_INNER][r];
    }
    unsigned budget = nxr_domain_budget(d);
    char cpus[128] = "";
    hwloc_bitmap_list_snprintf(cpus, sizeof(cpus), nxr_domain_cpuset(d));
    if (cfg.json)
        printf("{\"domain\":%d,\"cpus\":\"%s\",\"budget\":%u,\"clients\":%d,\"requests\":%d,"
               "\"rounds\":%d,\"batch\":%zu,\"dim\":%zu,\"hidden\":%zu,\"ways\":{",
               nxr_domain_id(d), cpus, budget, cfg.clients, cfg.requests, rounds, B, D, H);
    else
        printf("service: domain %d (cpus %s, budget %u), %d clients x %d requests, %d rounds; "
               "MLP %zux%zu -> %zu -> %zu\n"
               "%-6s %12s %10s %10s %14s\n",
               nxr_domain_id(d), cpus, budget, cfg.clients, cfg.requests, rounds, B, D, H, D,
               "way", "requests/s", "p50 us", "p99 us", "vs inner");
    for (int w = 0; w < WAYS; w++) {
        double a = median(rps[w], rounds), b = median(p50[w], rounds), c = median(p99[w], rounds),
               q = median(ratio[w], rounds);
        if (cfg.json)
            printf("%s\"%s\":{\"rps\":%.1f,\"p50_us\":%.1f,\"p99_us\":%.1f,\"rps_vs_inner\":%.3f}",
                   w ? "," : "", way_names[w], a, b, c, q);
        else
            printf("%-6s %12.0f %10.1f %10.1f %14.2f\n", way_names[w], a, b, c, q);
    }
    if (cfg.json)
        printf("}}\n");
    for (int i = 0; i < cfg.clients; i++) {
        nxr_scope_destroy(cl[i].scope);
        nxr_ctx_destroy(cl[i].ctx);
        nxr_domain_free(cl[i].x);
        nxr_domain_free(cl[i].y);
        free(cl[i].lat_us);
    }
    nxr_domain_free(m.w1);
    nxr_domain_free(m.b1);
    nxr_domain_free(m.w2);
    nxr_domain_free(m.b2);
    nxr_domain_free(m.b1_rows);
    nxr_domain_free(m.b2_rows);
    nxr_runtime_destroy(rt);
    return 0;
}
