/*
 * One nxr runtime per MPI rank (DESIGN.md section 4, docs/deployment.md).
 *
 * Each rank creates its own runtime from the allowed set its launcher gave
 * it (`mpirun --bind-to core|socket` narrows the process's affinity; nxr
 * never widens it), finds the domain it runs on, and runs a model forward
 * pass on its shard of a batch with nxr kernels on that domain. The partial
 * results are combined with MPI_Allreduce(MPI_IN_PLACE, ...) directly on a
 * pool buffer of the rank's domain: nxr_buffer_export hands MPI the buffer's
 * own memory (no staging copy, nxr keeps ownership). Each rank fills its own
 * rows of the batch's output and zeros elsewhere, so the in-place sum is the
 * whole batch's output on every rank. Rank 0 checks it against a reference
 * computed on one rank (the same model over the whole batch through plain C
 * ops in double, no nxr) and gathers, from every rank, its CPU affinity (as
 * the kernel reports it), the runtime's allowed set, its domain (id, node,
 * CPUs, memory binding), the buffer (address, bytes, the node its pages are
 * on) and the pointer it passed to MPI_Allreduce. Text, or one JSON object
 * with --json.
 *
 *   mpirun -np 2 --bind-to core bazel-bin/examples/mpi_ranks --json
 *
 * Options: --json, --batch N (rows, default 64), --hidden N (default 64),
 * --layers N (default 2), --vocab N (default 64). Exit status 0 when every
 * rank ran and the result matches the reference, 1 otherwise (the same on
 * every rank).
 *
 * The model is a small one written here: residual blocks x += silu(x W_l)
 * and a softmax head, run by the ranks with nxr's kernels and by the
 * reference in plain C in double (model_forward, ref_forward below).
 * Outside the tree: mpicc mpi_ranks.c $(pkg-config --cflags --libs nxr) -lm
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* cpu_set_t, sched_getaffinity */
#endif
#include <nxr/nxr.h>

#include <errno.h>
#include <math.h>
#include <mpi.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define RECORD 1024 /* bytes of one rank's JSON record */

/* The model: `layers` blocks of hidden x hidden weights, then a hidden x
 * vocab head. */
struct model {
    size_t hidden, layers, vocab;
};

struct shape {
    struct model model;
    size_t batch;
};

#define SEED_WEIGHTS 11
#define SEED_INPUT   13

static size_t model_floats(const struct model *m)
{
    return m->layers * m->hidden * m->hidden + m->hidden * m->vocab;
}

/* Floats of scratch a forward pass over `rows` rows needs. */
static size_t model_scratch_floats(const struct model *m, size_t rows)
{
    return rows * (3 * m->hidden + m->vocab);
}

/* Deterministic values in [-0.05, 0.05] (weights) and [-0.5, 0.5] (input). */
static void model_fill(const struct model *m, unsigned seed, float *w)
{
    for (size_t i = 0; i < model_floats(m); i++)
        w[i] = (float)((i * 7919 + seed * 31) % 101) / 1000.0f - 0.05f;
}

static void model_input(const struct model *m, unsigned seed, size_t rows, float *x)
{
    for (size_t i = 0; i < rows * m->hidden; i++)
        x[i] = (float)((i * 13 + seed) % 17) / 17.0f - 0.5f;
}

/* out[rows x vocab] = softmax(head(blocks(input))), with nxr's kernels on
 * ctx's domain; scratch holds model_scratch_floats(m, rows). */
static int model_forward(nxr_ctx_t *ctx, const struct model *m, const float *w, size_t rows,
                         const float *input, float *out, float *scratch)
{
    const size_t h = m->hidden;
    float *x = scratch, *y = x + rows * h, *t = y + rows * h, *logits = t + rows * h;
    memcpy(x, input, rows * h * sizeof(float));
    int rc = 0;
    for (size_t l = 0; l < m->layers && rc == 0; l++) {
        struct nxr_sgemm_args g = {.m = rows, .n = h, .k = h, .alpha = 1, .a = x, .lda = h,
                              .b = w + l * h * h, .ldb = h, .beta = 0, .c = t, .ldc = h};
        if ((rc = nxr_sgemm(ctx, &g)) == 0 &&
            (rc = nxr_unary(ctx, NXR_UNARY_SILU, rows * h, t, t)) == 0 &&
            (rc = nxr_binary(ctx, NXR_BINARY_ADD, rows * h, x, t, y)) == 0) {
            float *swap = x;
            x = y;
            y = swap;
        }
    }
    struct nxr_sgemm_args head = {.m = rows, .n = m->vocab, .k = h, .alpha = 1, .a = x, .lda = h,
                             .b = w + m->layers * h * h, .ldb = m->vocab, .beta = 0,
                             .c = logits, .ldc = m->vocab};
    if (rc == 0)
        rc = nxr_sgemm(ctx, &head);
    if (rc == 0)
        rc = nxr_softmax(ctx, rows, m->vocab, logits, m->vocab, out, m->vocab);
    return rc;
}

/* ---- the reference: the same model in plain C, in double -------------------- */

static int ref_forward(const struct model *m, const float *w, size_t rows, const float *input,
                       float *out)
{
    const size_t h = m->hidden, v = m->vocab;
    double *x = malloc(rows * h * sizeof(double)), *t = malloc(h * sizeof(double)),
           *logits = malloc(v * sizeof(double));
    if (x == NULL || t == NULL || logits == NULL) {
        free(x);
        free(t);
        free(logits);
        return -ENOMEM;
    }
    for (size_t i = 0; i < rows * h; i++)
        x[i] = input[i];
    for (size_t r = 0; r < rows; r++) {
        double *xr = x + r * h;
        for (size_t l = 0; l < m->layers; l++) {
            const float *wl = w + l * h * h;
            for (size_t j = 0; j < h; j++) {
                double acc = 0;
                for (size_t k = 0; k < h; k++)
                    acc += xr[k] * wl[k * h + j];
                t[j] = acc / (1.0 + exp(-acc)); /* silu */
            }
            for (size_t j = 0; j < h; j++)
                xr[j] += t[j];
        }
        const float *wh = w + m->layers * h * h;
        double mx = -INFINITY, sum = 0;
        for (size_t j = 0; j < v; j++) {
            double acc = 0;
            for (size_t k = 0; k < h; k++)
                acc += xr[k] * wh[k * v + j];
            logits[j] = acc;
            mx = fmax(mx, acc);
        }
        for (size_t j = 0; j < v; j++)
            sum += exp(logits[j] - mx);
        for (size_t j = 0; j < v; j++)
            out[r * v + j] = (float)(exp(logits[j] - mx) / sum);
    }
    free(x);
    free(t);
    free(logits);
    return 0;
}

/* ---- where this rank is ------------------------------------------------------ */

static int affinity_list(char *buf, size_t size)
{
    hwloc_bitmap_t set = hwloc_bitmap_alloc();
    cpu_set_t mask;
    int rc = sched_getaffinity(0, sizeof mask, &mask) == 0 ? 0 : -errno;
    for (int cpu = 0; rc == 0 && cpu < CPU_SETSIZE; cpu++)
        if (CPU_ISSET(cpu, &mask))
            hwloc_bitmap_set(set, (unsigned)cpu);
    hwloc_bitmap_list_snprintf(buf, size, set);
    hwloc_bitmap_free(set);
    return rc;
}

/* ---- one rank ------------------------------------------------------------------- */

struct rank_report {
    int rank;
    size_t row_begin, row_end;
    char affinity[256], allowed[256], domain_cpus[256];
    int domain_id, domain_node;
    unsigned domain_workers;
    const char *domain_memory; /* nxr_mem_binding_name: a static string */
    void *buffer_data;
    size_t buffer_bytes;
    int buffer_node;
    int buffer_domain;
    void *allreduce_buf; /* what MPI_Allreduce was handed */
    size_t allreduce_count;
};

static void record_json(const struct rank_report *r, char *out)
{
    char host[64] = "";
    gethostname(host, sizeof host - 1);
    snprintf(out, RECORD,
             "{\"rank\":%d,\"host\":\"%s\",\"pid\":%ld,\"affinity\":\"%s\",\"allowed\":\"%s\","
             "\"domain\":{\"id\":%d,\"node\":%d,\"cpus\":\"%s\",\"workers\":%u,\"memory\":\"%s\"},"
             "\"rows\":[%zu,%zu],"
             "\"buffer\":{\"data\":\"%p\",\"bytes\":%zu,\"node\":%d,\"domain\":%d},"
             "\"allreduce\":{\"sendbuf\":\"MPI_IN_PLACE\",\"recvbuf\":\"%p\",\"count\":%zu}}",
             r->rank, host, (long)getpid(), r->affinity, r->allowed, r->domain_id, r->domain_node,
             r->domain_cpus, r->domain_workers, r->domain_memory, r->row_begin, r->row_end,
             r->buffer_data, r->buffer_bytes, r->buffer_node, r->buffer_domain, r->allreduce_buf,
             r->allreduce_count);
}

/* A rank that cannot go on ends the job: the others would wait for it in
 * the next collective forever. mpirun then exits non-zero. */
static void __attribute__((noreturn)) fail(int rank, const char *what, int rc)
{
    fprintf(stderr, "mpi_ranks: rank %d: %s: %s\n", rank, what, nxr_strerror(rc));
    MPI_Abort(MPI_COMM_WORLD, 1);
    exit(1);
}

/* Runs this rank's part (collective: every rank calls it) and fills rep;
 * on rank 0 *max_err is the largest difference from the reference. Any
 * failure ends the job (fail). */
static void run_rank(int rank, int size, const struct shape *s, struct rank_report *rep,
                     double *max_err)
{
    int rc;
    nxr_runtime_t *rt;
    nxr_ctx_t *ctx;
    nxr_buffer_t *outbuf, *scratch;
    float *w, *x;
    const struct model *m = &s->model;
    /* Defaults, environment honoured (NXR_TOPOLOGY, NXR_DOMAINS, ...): the
     * allowed set is whatever the launcher bound this process to. */
    if ((rc = nxr_runtime_create(NULL, &rt)) != 0)
        fail(rank, "runtime", rc);
    /* A context on the domain of the CPUs the launcher gave this rank. */
    if ((rc = nxr_ctx_create_here(rt, &ctx)) != 0)
        fail(rank, "no domain holds this rank's CPUs", rc);
    nxr_domain_t *d = nxr_ctx_domain(ctx);
    affinity_list(rep->affinity, sizeof rep->affinity);
    hwloc_bitmap_list_snprintf(rep->allowed, sizeof rep->allowed, nxr_runtime_allowed_cpus(rt));
    hwloc_bitmap_list_snprintf(rep->domain_cpus, sizeof rep->domain_cpus, nxr_domain_cpuset(d));
    rep->domain_id = nxr_domain_id(d);
    rep->domain_node = nxr_domain_node(d);
    rep->domain_workers = nxr_domain_workers(d);
    rep->domain_memory = nxr_mem_binding_name(nxr_domain_mem_binding(d));

    /* This rank's shard: rows [begin, end) of the batch. */
    rep->row_begin = s->batch * (size_t)rank / (size_t)size;
    rep->row_end = s->batch * (size_t)(rank + 1) / (size_t)size;
    size_t rows = rep->row_end - rep->row_begin;
    size_t floats = s->batch * m->vocab; /* the batch's output */

    /* A replica of the weights and the batch's input on the rank's node. */
    if ((rc = nxr_domain_malloc(d, model_floats(m) * sizeof(float), 64, (void **)&w)) != 0 ||
        (rc = nxr_domain_malloc(d, s->batch * m->hidden * sizeof(float), 64, (void **)&x)) != 0 ||
        (rc = nxr_buffer_acquire(d, (model_scratch_floats(m, rows) + 1) * sizeof(float),
                                 &scratch)) != 0 ||
        (rc = nxr_buffer_acquire(d, floats * sizeof(float), &outbuf)) != 0)
        fail(rank, "memory", rc);
    model_fill(m, SEED_WEIGHTS, w);
    model_input(m, SEED_INPUT, s->batch, x);

    /* The output of the whole batch, in a pool buffer of this domain: this
     * rank's rows computed in place, the others zero. */
    float *out = nxr_buffer_data(outbuf);
    memset(out, 0, floats * sizeof(float));
    if (rows > 0 &&
        (rc = model_forward(ctx, m, w, rows, x + rep->row_begin * m->hidden,
                            out + rep->row_begin * m->vocab, nxr_buffer_data(scratch))) != 0)
        fail(rank, "forward", rc);

    /* Combine in place, on the buffer's own memory: no staging copy. */
    void *ptr;
    size_t len;
    if ((rc = nxr_buffer_export(outbuf, &ptr, &len)) != 0)
        fail(rank, "export", rc);
    rep->allreduce_buf = ptr;
    rep->allreduce_count = floats;
    if (MPI_Allreduce(MPI_IN_PLACE, ptr, (int)floats, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD) !=
        MPI_SUCCESS)
        fail(rank, "MPI_Allreduce", -EIO);
    rep->buffer_data = nxr_buffer_data(outbuf);
    rep->buffer_bytes = nxr_buffer_size(outbuf);
    rep->buffer_node = nxr_mem_node(rep->buffer_data);
    /* Which domain the pointer MPI got belongs to, asked of the runtime's
     * address registry (not of the buffer handle). */
    nxr_domain_t *owner;
    rep->buffer_domain = nxr_mem_domain(rt, ptr, &owner) == 0 ? nxr_domain_id(owner) : -1;

    if (rank == 0) {
        /* The reference: the whole batch on this one rank, plain C ops. */
        float *ref = malloc(floats * sizeof(float));
        if (ref == NULL || ref_forward(m, w, s->batch, x, ref) != 0)
            fail(rank, "reference memory", -ENOMEM);
        *max_err = 0;
        for (size_t i = 0; i < floats; i++) {
            double e = fabs((double)out[i] - ref[i]);
            if (!(e <= *max_err)) /* NaN counts as the largest */
                *max_err = isnan(e) ? INFINITY : e;
        }
        free(ref);
    }

    nxr_buffer_release(outbuf);
    nxr_buffer_release(scratch);
    nxr_domain_free(x);
    nxr_domain_free(w);
    nxr_ctx_destroy(ctx);
    nxr_runtime_destroy(rt);
}

/* ---- output ------------------------------------------------------------------- */

static void print_text(int size, const struct shape *s, const char *records, double err, double tol,
                       bool ok)
{
    printf(
        "mpi_ranks: %d rank(s), batch %zu, the example's model: hidden %zu, %zu layer(s), vocab %zu\n",
        size, s->batch, s->model.hidden, s->model.layers, s->model.vocab);
    for (int r = 0; r < size; r++)
        printf("  %s\n", records + (size_t)r * RECORD);
    printf("allreduce (in place, on each rank's pool buffer) vs the one-rank reference: "
           "max |diff| %.3g (tolerance %.3g): %s\n",
           err, tol, ok ? "ok" : "MISMATCH");
}

static void print_json(int size, const struct shape *s, const char *records, double err, double tol,
                       bool ok, const char *topology)
{
    printf("{\"ranks\":%d,\"topology\":\"%s\","
           "\"model\":{\"name\":\"examples/mpi_ranks.c\",\"batch\":%zu,\"hidden\":%zu,"
           "\"layers\":%zu,\"vocab\":%zu},"
           "\"check\":{\"reference\":\"rank 0, the same model over the whole batch, plain C ops\","
           "\"max_abs_err\":%.6g,\"tolerance\":%.6g,\"ok\":%s},\"rank_info\":[",
           size, topology, s->batch, s->model.hidden, s->model.layers, s->model.vocab,
           isfinite(err) ? err : 1e300, tol, ok ? "true" : "false");
    for (int r = 0; r < size; r++)
        printf("%s%s", r ? "," : "", records + (size_t)r * RECORD);
    printf("]}\n");
}

static bool parse(int argc, char **argv, struct shape *s, bool *json)
{
    size_t batch = 64, hidden = 64, layers = 2, vocab = 64;
    *json = false;
    for (int i = 1; i < argc; i++) {
        size_t *field = NULL;
        if (strcmp(argv[i], "--json") == 0) {
            *json = true;
            continue;
        }
        if (strcmp(argv[i], "--batch") == 0)
            field = &batch;
        else if (strcmp(argv[i], "--hidden") == 0)
            field = &hidden;
        else if (strcmp(argv[i], "--layers") == 0)
            field = &layers;
        else if (strcmp(argv[i], "--vocab") == 0)
            field = &vocab;
        char *end;
        if (field == NULL || i + 1 >= argc || (*field = strtoul(argv[++i], &end, 10)) == 0 ||
            *end != '\0')
            return false;
    }
    s->batch = batch;
    s->model = (struct model){.hidden = hidden, .layers = layers, .vocab = vocab};
    return batch <= 1u << 16 && hidden <= 1u << 12 && layers <= 64 && vocab <= 1u << 16;
}

int main(int argc, char **argv)
{
    /* FUNNELED: nxr's workers never call MPI; only this thread does. */
    int provided;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided);
    if (provided < MPI_THREAD_FUNNELED) {
        fprintf(stderr, "mpi_ranks: this MPI does not support MPI_THREAD_FUNNELED\n");
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    struct shape s;
    bool json;
    if (!parse(argc, argv, &s, &json)) {
        if (rank == 0)
            fprintf(
                stderr,
                "usage: mpi_ranks [--json] [--batch N] [--hidden N] [--layers N] [--vocab N]\n");
        MPI_Finalize();
        return 2;
    }

    struct rank_report rep = {.rank = rank};
    double err = INFINITY;
    run_rank(rank, size, &s, &rep, &err);
    char mine[RECORD];
    record_json(&rep, mine);
    char *all = rank == 0 ? calloc((size_t)size, RECORD) : NULL;
    MPI_Gather(mine, RECORD, MPI_CHAR, all, RECORD, MPI_CHAR, 0, MPI_COMM_WORLD);

    /* Probabilities, float kernels against double: far below any real
     * difference (a wrong row is off by ~1/vocab). */
    const double tol = 1e-5;
    int ok = 0;
    if (rank == 0) {
        ok = err <= tol;
        const char *topo = getenv("NXR_TOPOLOGY");
        if (json)
            print_json(size, &s, all, err, tol, ok, topo != NULL ? topo : "hwloc");
        else
            print_text(size, &s, all, err, tol, ok);
        free(all);
    }
    MPI_Bcast(&ok, 1, MPI_INT, 0, MPI_COMM_WORLD);
    MPI_Finalize();
    return ok ? 0 : 1;
}
