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
 * computed on one rank (plain C loops in double over the whole batch, no nxr)
 * and gathers, from every rank, its CPU affinity (as the kernel reports it),
 * the runtime's allowed set, its domain (id, node, CPUs, memory binding), the
 * buffer (address, bytes, the node its pages are on) and the pointer it
 * passed to MPI_Allreduce. Text, or one JSON object with --json.
 *
 *   mpirun -np 2 --bind-to core bazel-bin/examples/mpi_ranks --json
 *
 * Options: --json, --batch N (rows, default 64), --hidden N (default 64),
 * --ffn N (default 4 * hidden). Exit status 0 when every rank ran and the
 * result matches the reference, 1 otherwise (the same on every rank).
 *
 * The model is a stand-in with the demo's block shape (a pre-norm,
 * residual MLP block: x + silu(rmsnorm(x) W_up) W_down).
 */
#include <errno.h>
#include <math.h>
#include <mpi.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "runtime/nxr.h"

#define RECORD 1024 /* bytes of one rank's JSON record */

struct shape {
    size_t batch, hidden, ffn;
};

/* ---- the model (same weights and inputs on every rank) --------------------- */

/* splitmix64: the same value for the same (seed, index) everywhere. */
static float uniform(uint64_t seed, uint64_t i)
{
    uint64_t z = seed + (i + 1) * 0x9e3779b97f4a7c15ull;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    z ^= z >> 31;
    return (float)((double)(z >> 11) / 9007199254740992.0 * 2.0 - 1.0);
}

static void fill(float *w, size_t n, uint64_t seed, float scale, size_t first)
{
    for (size_t i = 0; i < n; i++)
        w[i] = scale * uniform(seed, first + i);
}

struct weights {
    float *up;   /* hidden x ffn */
    float *down; /* ffn x hidden */
};

#define SEED_UP    11
#define SEED_DOWN  12
#define SEED_INPUT 13
#define RMS_EPS    1e-5f

/* out[rows x hidden] = x + silu(rmsnorm(x) W_up) W_down, on ctx's domain.
 * scratch: rows * (hidden + ffn) floats. */
static int forward(nxr_ctx_t *ctx, const struct shape *s, const struct weights *w, size_t rows,
                   const float *x, float *out, float *scratch)
{
    float *t = scratch, *u = scratch + rows * s->hidden;
    int rc = nxr_rmsnorm(ctx, rows, s->hidden, x, s->hidden, NULL, RMS_EPS, t, s->hidden);
    if (rc != 0)
        return rc;
    nxr_sgemm_args_t g = {.m = rows,
                          .n = s->ffn,
                          .k = s->hidden,
                          .alpha = 1,
                          .a = t,
                          .lda = s->hidden,
                          .b = w->up,
                          .ldb = s->ffn,
                          .beta = 0,
                          .c = u,
                          .ldc = s->ffn};
    if ((rc = nxr_sgemm(ctx, &g)) != 0)
        return rc;
    if ((rc = nxr_unary(ctx, NXR_UNARY_SILU, rows * s->ffn, u, u)) != 0)
        return rc;
    memcpy(out, x, rows * s->hidden * sizeof(float)); /* the residual */
    g = (nxr_sgemm_args_t){.m = rows,
                           .n = s->hidden,
                           .k = s->ffn,
                           .alpha = 1,
                           .a = u,
                           .lda = s->ffn,
                           .b = w->down,
                           .ldb = s->hidden,
                           .beta = 1,
                           .c = out,
                           .ldc = s->hidden};
    return nxr_sgemm(ctx, &g);
}

/* The reference: the same block by its definition, plain C in double, over
 * the whole batch on one rank. */
static void reference(const struct shape *s, const struct weights *w, const float *x, double *out)
{
    double *t = malloc(s->hidden * sizeof(double)), *u = malloc(s->ffn * sizeof(double));
    for (size_t r = 0; r < s->batch; r++) {
        const float *xr = x + r * s->hidden;
        double ms = 0;
        for (size_t c = 0; c < s->hidden; c++)
            ms += (double)xr[c] * xr[c];
        double inv = 1.0 / sqrt(ms / (double)s->hidden + RMS_EPS);
        for (size_t c = 0; c < s->hidden; c++)
            t[c] = xr[c] * inv;
        for (size_t j = 0; j < s->ffn; j++) {
            double acc = 0;
            for (size_t c = 0; c < s->hidden; c++)
                acc += t[c] * w->up[c * s->ffn + j];
            u[j] = acc / (1.0 + exp(-acc));
        }
        for (size_t c = 0; c < s->hidden; c++) {
            double acc = xr[c];
            for (size_t j = 0; j < s->ffn; j++)
                acc += u[j] * w->down[j * s->hidden + c];
            out[r * s->hidden + c] = acc;
        }
    }
    free(t);
    free(u);
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

/* The domain this process runs on: the one whose CPU set holds the whole
 * affinity the launcher gave it (a rank bound to a core or a socket lies in
 * exactly one), else the one holding the CPU it runs on now. */
static int domain_here(const nxr_runtime_t *rt, const nxr_domain_t **out)
{
    *out = NULL;
    hwloc_bitmap_t mine = hwloc_bitmap_alloc();
    cpu_set_t mask;
    if (sched_getaffinity(0, sizeof mask, &mask) != 0) {
        hwloc_bitmap_free(mine);
        return -errno;
    }
    for (int cpu = 0; cpu < CPU_SETSIZE; cpu++)
        if (CPU_ISSET(cpu, &mask))
            hwloc_bitmap_set(mine, (unsigned)cpu);
    int now = sched_getcpu();
    const nxr_domain_t *by_cpu = NULL;
    for (size_t i = 0; i < nxr_runtime_domain_count(rt) && *out == NULL; i++) {
        const nxr_domain_t *d = nxr_runtime_domain_at(rt, i);
        hwloc_const_bitmap_t cpus = nxr_domain_cpuset(d);
        if (cpus == NULL)
            continue;
        if (hwloc_bitmap_isincluded(mine, cpus))
            *out = d;
        else if (by_cpu == NULL && now >= 0 && hwloc_bitmap_isset(cpus, (unsigned)now))
            by_cpu = d;
    }
    hwloc_bitmap_free(mine);
    if (*out == NULL)
        *out = by_cpu;
    return *out != NULL ? 0 : NXR_ENODOMAIN;
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
    struct weights w;
    float *x;
    /* Defaults, environment honoured (NXR_TOPOLOGY, NXR_DOMAINS, ...): the
     * allowed set is whatever the launcher bound this process to. */
    if ((rc = nxr_runtime_create(&rt, NULL)) != 0)
        fail(rank, "runtime", rc);
    const nxr_domain_t *d;
    if ((rc = domain_here(rt, &d)) != 0)
        fail(rank, "no domain holds this rank's CPUs", rc);
    if ((rc = nxr_ctx_create(&ctx, rt, nxr_domain_id(d))) != 0)
        fail(rank, "context", rc);
    affinity_list(rep->affinity, sizeof rep->affinity);
    hwloc_bitmap_list_snprintf(rep->allowed, sizeof rep->allowed, nxr_runtime_allowed_cpus(rt));
    hwloc_bitmap_list_snprintf(rep->domain_cpus, sizeof rep->domain_cpus, nxr_domain_cpuset(d));
    rep->domain_id = nxr_domain_id(d);
    rep->domain_node = nxr_domain_node(d);
    rep->domain_workers = nxr_domain_workers(d);
    rep->domain_memory = nxr_mem_binding_name(nxr_domain_mem_binding(d));

    /* Weights on the rank's node (every rank holds a replica). */
    size_t nup = s->hidden * s->ffn;
    if ((rc = nxr_domain_malloc(d, nup * sizeof(float), 64, (void **)&w.up)) != 0 ||
        (rc = nxr_domain_malloc(d, nup * sizeof(float), 64, (void **)&w.down)) != 0)
        fail(rank, "weights", rc);
    fill(w.up, nup, SEED_UP, 1.0f / sqrtf((float)s->hidden), 0);
    fill(w.down, nup, SEED_DOWN, 1.0f / sqrtf((float)s->ffn), 0);

    /* This rank's shard: rows [begin, end) of the batch. */
    rep->row_begin = s->batch * (size_t)rank / (size_t)size;
    rep->row_end = s->batch * (size_t)(rank + 1) / (size_t)size;
    size_t rows = rep->row_end - rep->row_begin;
    size_t floats = s->batch * s->hidden;
    if ((rc = nxr_domain_malloc(d, (rows + 1) * s->hidden * sizeof(float), 64, (void **)&x)) != 0 ||
        (rc = nxr_buffer_acquire(d, (rows + 1) * (s->hidden + s->ffn) * sizeof(float), &scratch)) !=
            0 ||
        (rc = nxr_buffer_acquire(d, floats * sizeof(float), &outbuf)) != 0)
        fail(rank, "memory", rc);
    fill(x, rows * s->hidden, SEED_INPUT, 1.0f, rep->row_begin * s->hidden);

    /* The output of the whole batch, in a pool buffer of this domain: this
     * rank's rows computed in place, the others zero. */
    float *out = nxr_buffer_data(outbuf);
    memset(out, 0, floats * sizeof(float));
    if (rows > 0 && (rc = forward(ctx, s, &w, rows, x, out + rep->row_begin * s->hidden,
                                  nxr_buffer_data(scratch))) != 0)
        fail(rank, "forward", rc);

    /* Combine in place, on the buffer's own memory: no staging copy. */
    void *ptr;
    size_t len;
    if ((rc = nxr_buffer_export(outbuf, &ptr, &len)) != 0)
        fail(rank, "export", rc);
    rep->allreduce_buf = ptr;
    rep->allreduce_count = floats;
    if (MPI_Allreduce(MPI_IN_PLACE, ptr, (int)floats, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD) !=
        MPI_SUCCESS) {
        fail(rank, "MPI_Allreduce", -EIO);
    }
    rep->buffer_data = nxr_buffer_data(outbuf);
    rep->buffer_bytes = nxr_buffer_size(outbuf);
    rep->buffer_node = nxr_mem_node(rep->buffer_data);
    rep->buffer_domain = nxr_buffer_domain(outbuf);

    if (rank == 0) {
        /* The reference needs the whole batch's input on one rank. */
        float *all = malloc(floats * sizeof(float));
        double *ref = malloc(floats * sizeof(double));
        struct weights wr = {.up = w.up, .down = w.down};
        fill(all, floats, SEED_INPUT, 1.0f, 0);
        reference(s, &wr, all, ref);
        *max_err = 0;
        for (size_t i = 0; i < floats; i++) {
            double e = fabs((double)out[i] - ref[i]);
            if (!(e <= *max_err)) /* NaN counts as the largest */
                *max_err = isnan(e) ? INFINITY : e;
        }
        free(all);
        free(ref);
    }

    nxr_buffer_release(outbuf);
    nxr_buffer_release(scratch);
    nxr_domain_free(x);
    nxr_domain_free(w.up);
    nxr_domain_free(w.down);
    nxr_ctx_destroy(ctx);
    nxr_runtime_destroy(rt);
}

/* ---- output ------------------------------------------------------------------- */

static void print_text(int size, const struct shape *s, const char *records, double err, double tol,
                       bool ok)
{
    printf("mpi_ranks: %d rank(s), batch %zu, hidden %zu, ffn %zu\n", size, s->batch, s->hidden,
           s->ffn);
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
           "\"model\":{\"block\":\"x + silu(rmsnorm(x) W_up) W_down\",\"batch\":%zu,"
           "\"hidden\":%zu,\"ffn\":%zu},"
           "\"check\":{\"reference\":\"rank 0, plain C in double over the whole batch\","
           "\"max_abs_err\":%.6g,\"tolerance\":%.6g,\"ok\":%s},\"rank_info\":[",
           size, topology, s->batch, s->hidden, s->ffn, isfinite(err) ? err : 1e300, tol,
           ok ? "true" : "false");
    for (int r = 0; r < size; r++)
        printf("%s%s", r ? "," : "", records + (size_t)r * RECORD);
    printf("]}\n");
}

static bool parse(int argc, char **argv, struct shape *s, bool *json)
{
    *s = (struct shape){.batch = 64, .hidden = 64, .ffn = 0};
    *json = false;
    for (int i = 1; i < argc; i++) {
        size_t *field = NULL;
        if (strcmp(argv[i], "--json") == 0) {
            *json = true;
            continue;
        }
        if (strcmp(argv[i], "--batch") == 0)
            field = &s->batch;
        else if (strcmp(argv[i], "--hidden") == 0)
            field = &s->hidden;
        else if (strcmp(argv[i], "--ffn") == 0)
            field = &s->ffn;
        char *end;
        if (field == NULL || i + 1 >= argc || (*field = strtoul(argv[++i], &end, 10)) == 0 ||
            *end != '\0')
            return false;
    }
    if (s->ffn == 0)
        s->ffn = 4 * s->hidden;
    return s->batch * s->hidden <= (size_t)1 << 28 && s->hidden * s->ffn <= (size_t)1 << 28;
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
            fprintf(stderr, "usage: mpi_ranks [--json] [--batch N] [--hidden N] [--ffn N]\n");
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

    /* float GEMM against double: a few ulps of the outputs' size. */
    const double tol = 1e-4;
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
