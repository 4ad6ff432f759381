/*
 * Benchmark of spans (runtime/nxr_span.h) against the one-domain context,
 * in the same run, interleaved call by call.
 *
 *   loop          nxr_parallel_for of a triad over 1 Mi floats, grain 4096
 *   linear out    nxr_span_linear, y = W x, W 1024 x 1024 sharded by output
 *   linear inner  the same product with W sharded by the inner dimension
 *
 * Part 1, this machine's layout (one domain per node): a span over every
 * domain beside a context on the first. On one node the span has one member
 * and is that context, so the goal (span <= 1.05x the context) is the cost
 * of creating it through nxr_span_create and nothing else.
 * Part 2, when two CPUs are allowed: two declared domains (one CPU each) on
 * this one node, the span over both beside a context on one: what splitting
 * one call over two teams costs or gains when the memory is the same.
 * Each figure is the median over --reps rounds of a burst of calls.
 *
 * Usage: span [--reps N] [--json] [--short]
 * --json: one object, {"load", "parts": [{"title", "peer", "span", "ops":
 * [{"op", "peer_us", "span_us", "ratio"}]}]}; --short (CI's bench stage):
 * 3 rounds.
 */
#include <errno.h>
#include <sched.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench/timing.h"
#include "runtime/nxr.h"

#define N_LOOP  (1 << 20)
#define DIM     1024
#define BURST   16
#define MAX_REP 101

static void die(const char *what, int rc)
{
    fprintf(stderr, "span bench: %s failed: %d (%s)\n", what, rc, nxr_strerror(rc));
    exit(1);
}

static float *a, *b, *c, *x, *y;
static bool json;
static int parts_printed; /* --json: the parts so far, for the commas */

static void triad(void *p, size_t lo, size_t hi, unsigned w)
{
    (void)p, (void)w;
    for (size_t i = lo; i < hi; i++)
        a[i] = b[i] + 3.0f * c[i];
}

/* One workload on one context: a model (its shards) and what to call. */
struct side {
    nxr_ctx_t *ctx;
    nxr_shards_t *w_out, *w_inner;
};

static void side_init(struct side *s, nxr_ctx_t *ctx)
{
    s->ctx = ctx;
    size_t n = nxr_span_domain_count(ctx);
    int rc;
    if ((rc = nxr_shards_create(ctx, DIM, DIM * sizeof(float), NULL, n, &s->w_out)) != 0 ||
        (rc = nxr_shards_create(ctx, DIM, DIM * sizeof(float), NULL, n, &s->w_inner)) != 0)
        die(nxr_last_error(), rc);
    for (size_t r = 0; r < DIM; r++) {
        float *o = nxr_shards_row(s->w_out, r), *i = nxr_shards_row(s->w_inner, r);
        for (size_t k = 0; k < DIM; k++)
            o[k] = i[k] = (float)((r * 31 + k * 17) % 13) / 13.0f;
    }
}

static void side_fini(struct side *s)
{
    nxr_shards_destroy(s->w_out);
    nxr_shards_destroy(s->w_inner);
}

enum op { OP_LOOP, OP_OUT, OP_INNER, OP_COUNT };
static const char *const op_name[OP_COUNT] = {"loop", "linear out", "linear inner"};

/* Seconds per call of a burst of BURST calls. */
static double burst(const struct side *s, enum op op)
{
    struct nxr_span_linear_args l = {.m = 1, .k = DIM, .n = DIM, .x = x, .ldx = DIM, .y = y,
                                     .ldy = DIM};
    l.w = op == OP_OUT ? s->w_out : s->w_inner;
    l.layout = op == OP_OUT ? NXR_SHARD_BY_OUTPUT : NXR_SHARD_BY_INNER;
    double t0 = bench_now();
    for (int i = 0; i < BURST; i++) {
        int rc = op == OP_LOOP ? nxr_parallel_for(s->ctx, 0, N_LOOP, 4096, triad, NULL)
                               : nxr_span_linear(s->ctx, &l);
        if (rc != 0)
            die(nxr_last_error(), rc);
    }
    return (bench_now() - t0) / BURST;
}

/* The two sides, call bursts interleaved, medians per op. */
static void compare(const char *title, const struct side *peer, const char *peer_name,
                    const struct side *span, const char *span_name, int reps)
{
    if (json)
        printf("%s{\"title\":\"%s\",\"peer\":\"%s\",\"span\":\"%s\",\"ops\":[",
               parts_printed++ ? "," : "", title, peer_name, span_name);
    else
        printf("%s\n%-14s %14s %14s %10s\n", title, "op", peer_name, span_name, "span/peer");
    for (int op = 0; op < OP_COUNT; op++) {
        double tp[MAX_REP], ts[MAX_REP];
        burst(peer, (enum op)op); /* warm both: pools, pages, teams */
        burst(span, (enum op)op);
        for (int r = 0; r < reps; r++) {
            if (r % 2 == 0) {
                tp[r] = burst(peer, (enum op)op);
                ts[r] = burst(span, (enum op)op);
            } else {
                ts[r] = burst(span, (enum op)op);
                tp[r] = burst(peer, (enum op)op);
            }
        }
        double mp = bench_median(tp, reps), ms = bench_median(ts, reps);
        if (json)
            printf("%s{\"op\":\"%s\",\"peer_us\":%.2f,\"span_us\":%.2f,\"ratio\":%.4f}",
                   op ? "," : "", op_name[op], mp * 1e6, ms * 1e6, ms / mp);
        else
            printf("%-14s %11.1f us %11.1f us %9.3fx\n", op_name[op], mp * 1e6, ms * 1e6, ms / mp);
    }
    if (json)
        printf("]}");
}

static void run(const char *domains, const char *title, int reps)
{
    nxr_runtime_t *rt;
    struct nxr_runtime_opts o;
    nxr_runtime_opts_init(&o);
    o.domains = domains;
    int rc = nxr_runtime_create(&o, &rt);
    if (rc != 0)
        die("nxr_runtime_create", rc);
    nxr_ctx_t *one, *span;
    struct nxr_span_opts so;
    nxr_span_opts_init(&so);
    so.every = true;
    if ((rc = nxr_ctx_create(rt, nxr_domain_id(nxr_runtime_domain_at(rt, 0)), &one)) != 0 ||
        (rc = nxr_span_create(rt, &so, &span)) != 0)
        die("context", rc);
    struct side peer, across;
    side_init(&peer, one);
    side_init(&across, span);
    char name[32];
    snprintf(name, sizeof(name), "span of %zu", nxr_span_domain_count(span));
    compare(title, &peer, "one domain", &across, name, reps);
    side_fini(&across);
    side_fini(&peer);
    nxr_ctx_destroy(span);
    nxr_ctx_destroy(one);
    nxr_runtime_destroy(rt);
}

int main(int argc, char **argv)
{
    int reps = 15;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--reps") == 0 && i + 1 < argc)
            reps = atoi(argv[++i]);
        else if (strcmp(argv[i], "--json") == 0)
            json = true;
        else if (strcmp(argv[i], "--short") == 0)
            reps = 3;
        else {
            fprintf(stderr, "usage: span [--reps N] [--json] [--short]\n");
            return 2;
        }
    }
    if (reps < 1 || reps > MAX_REP)
        reps = 15;
    size_t bytes = N_LOOP * sizeof(float);
    a = malloc(bytes), b = malloc(bytes), c = malloc(bytes);
    x = malloc(DIM * sizeof(float)), y = malloc(DIM * sizeof(float));
    if (a == NULL || b == NULL || c == NULL || x == NULL || y == NULL)
        die("malloc", -ENOMEM);
    for (size_t i = 0; i < N_LOOP; i++)
        b[i] = c[i] = (float)(i % 7);
    for (size_t i = 0; i < DIM; i++)
        x[i] = (float)(i % 5) / 5.0f;
    FILE *f = fopen("/proc/loadavg", "r");
    char load[64] = "?";
    if (f != NULL) {
        if (fgets(load, sizeof(load), f) == NULL)
            strcpy(load, "?");
        fclose(f);
    }
    if (json) {
        load[strcspn(load, "\n")] = '\0';
        printf("{\"load\":\"%s\",\"parts\":[", load);
    } else {
        printf("load average: %s", load);
    }
    run(NULL, "== this machine's domains: a span over every domain vs one domain", reps);
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof(set), &set) == 0 && CPU_COUNT(&set) >= 2) {
        int first = -1, second = -1;
        for (int i = 0; i < CPU_SETSIZE && second < 0; i++) {
            if (CPU_ISSET(i, &set)) {
                if (first < 0)
                    first = i;
                else
                    second = i;
            }
        }
        char decl[64];
        snprintf(decl, sizeof(decl), "0:%d;1:%d", first, second);
        run(decl, "== two declared domains on one node (one CPU each): span of both vs one",
            reps);
    }
    if (json)
        printf("]}\n");
    free(a), free(b), free(c), free(x), free(y);
    return 0;
}
