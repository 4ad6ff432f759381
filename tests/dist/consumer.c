/*
 * A host program built outside Bazel against an installed nxr, as a user
 * builds one: `cc consumer.c $(pkg-config --cflags --libs nxr)`, the static
 * and CMake variants of the same (tests/dist/install_test.sh). It creates a
 * runtime, checks that nxr sees this process's CPUs (read here with
 * sched_getaffinity, converted with the public cpu_set_t helper), runs an
 * nxr_parallel_for and an nxr_sgemm and checks both against references
 * computed here, independently of nxr.
 *
 * usage: consumer VERSION -- VERSION is what pkg-config or CMake reported;
 * the library must say the same. Prints one "consumer: ok" line; exits 1
 * with a "FAILED" line per mismatch.
 */
#define _GNU_SOURCE /* cpu_set_t, sched_getaffinity */
#include <nxr/nxr.h>

#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int failures;

#define CHECK(cond, ...)                                                                           \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "consumer: FAILED line %d (%s): ", __LINE__, #cond);                 \
            fprintf(stderr, __VA_ARGS__);                                                          \
            fputc('\n', stderr);                                                                   \
            failures++;                                                                            \
        }                                                                                          \
    } while (0)

#define LOOP_N 100000u

struct loop {
    float *out;
    unsigned *visits;
};

static float loop_value(size_t i)
{
    return (float)(i % 977u) * 0.25f + 1.0f;
}

/* Each index belongs to exactly one chunk, so plain stores suffice. */
static void loop_body(void *arg, size_t begin, size_t end, unsigned worker)
{
    struct loop *l = arg;
    (void)worker;
    for (size_t i = begin; i < end; i++) {
        l->out[i] = loop_value(i);
        l->visits[i]++;
    }
}

/* Small dyadic values: every product and partial sum of this GEMM is exact
 * in float, so nxr's result must equal the reference bit for bit, whatever
 * the kernel's summation order or FMA use. */
static float a_at(size_t i, size_t p)
{
    return (float)((int)((i * 7 + p * 3) % 11) - 5) / 4.0f;
}

static float b_at(size_t p, size_t j)
{
    return (float)((int)((p * 5 + j * 2) % 13) - 6) / 8.0f;
}

static float c_at(size_t i, size_t j)
{
    return (float)((i + j) % 5) / 2.0f;
}

static void check_sgemm(nxr_ctx_t *ctx)
{
    enum { M = 67, N = 45, K = 33, LDA = K + 3, LDB = K, LDC = N + 1 };
    static float a[M * LDA], bt[N * LDB], c[M * LDC];
    for (size_t i = 0; i < M; i++)
        for (size_t p = 0; p < K; p++)
            a[i * LDA + p] = a_at(i, p);
    /* op(B) = B^T: B is stored n x k. */
    for (size_t j = 0; j < N; j++)
        for (size_t p = 0; p < K; p++)
            bt[j * LDB + p] = b_at(p, j);
    for (size_t i = 0; i < M; i++)
        for (size_t j = 0; j < LDC; j++)
            c[i * LDC + j] = j < N ? c_at(i, j) : -7.0f; /* padding must stay */
    struct nxr_sgemm_args g = {.trans_a = false, .trans_b = true, .m = M, .n = N, .k = K,
                          .alpha = 1.5f, .a = a, .lda = LDA, .b = bt, .ldb = LDB,
                          .beta = 0.5f, .c = c, .ldc = LDC};
    int rc = nxr_sgemm(ctx, &g);
    CHECK(rc == 0, "nxr_sgemm: %s", nxr_strerror(rc));
    size_t wrong = 0;
    for (size_t i = 0; i < M; i++) {
        for (size_t j = 0; j < N; j++) {
            double ref = 0.0;
            for (size_t p = 0; p < K; p++)
                ref += (double)a_at(i, p) * (double)b_at(p, j);
            ref = 1.5 * ref + 0.5 * (double)c_at(i, j);
            wrong += (double)c[i * LDC + j] != ref;
        }
        wrong += c[i * LDC + N] != -7.0f;
    }
    CHECK(wrong == 0, "sgemm %dx%dx%d: %zu element(s) differ from the reference", M, N, K, wrong);
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: consumer VERSION\n");
        return 2;
    }
    /* The library's version, the headers' and the package's agree. */
    CHECK(strcmp(nxr_version_string(), argv[1]) == 0, "library %s, package %s",
          nxr_version_string(), argv[1]);
    CHECK(nxr_version() == NXR_VERSION, "library %#x, headers %#x", nxr_version(), NXR_VERSION);

    nxr_runtime_t *rt = NULL;
    int rc = nxr_runtime_create(NULL, &rt);
    if (rc != 0) {
        fprintf(stderr, "consumer: FAILED nxr_runtime_create: %s\n", nxr_strerror(rc));
        return 1;
    }

    /* nxr's allowed set is this process's affinity. */
    cpu_set_t mask;
    CPU_ZERO(&mask);
    CHECK(sched_getaffinity(0, sizeof(mask), &mask) == 0, "sched_getaffinity");
    hwloc_bitmap_t mine = NULL;
    rc = nxr_cpuset_from_cpu_set(&mask, sizeof(mask), &mine);
    CHECK(rc == 0, "nxr_cpuset_from_cpu_set: %s", nxr_strerror(rc));
    char list[256] = "?";
    if (rc == 0) {
        CHECK(hwloc_bitmap_isequal(mine, nxr_runtime_allowed_cpus(rt)),
              "nxr's allowed set is not this process's affinity");
        CHECK(nxr_cpuset_format(mine, list, sizeof(list), NULL) == 0, "nxr_cpuset_format");
    }
    hwloc_bitmap_free(mine);

    nxr_domain_t *d = nxr_runtime_domain_at(rt, 0);
    nxr_ctx_t *ctx = NULL;
    rc = nxr_ctx_create(rt, nxr_domain_id(d), &ctx);
    if (rc != 0) {
        fprintf(stderr, "consumer: FAILED nxr_ctx_create: %s\n", nxr_strerror(rc));
        nxr_runtime_destroy(rt);
        return 1;
    }

    struct loop l = {.out = calloc(LOOP_N, sizeof(float)), .visits = calloc(LOOP_N, sizeof(unsigned))};
    if (l.out == NULL || l.visits == NULL)
        return 1;
    rc = nxr_parallel_for(ctx, 0, LOOP_N, 1000, loop_body, &l);
    CHECK(rc == 0, "nxr_parallel_for: %s", nxr_strerror(rc));
    size_t bad = 0;
    for (size_t i = 0; i < LOOP_N; i++)
        bad += l.visits[i] != 1 || l.out[i] != loop_value(i);
    CHECK(bad == 0, "parallel_for: %zu of %u indices not visited exactly once with the right value",
          bad, LOOP_N);
    free(l.out);
    free(l.visits);

    check_sgemm(ctx);

    size_t domains = nxr_runtime_domain_count(rt);
    unsigned workers = nxr_domain_workers(d);
    nxr_ctx_destroy(ctx);
    nxr_runtime_destroy(rt);
    if (failures != 0)
        return 1;
    printf("consumer: ok, nxr %s, %zu domain(s), CPUs %s, domain 0 with %u worker(s): "
           "parallel_for over %u indices and sgemm 67x45x33 match the references\n",
           nxr_version_string(), domains, list, workers, LOOP_N);
    return 0;
}
