/*
 * The OpenBLAS provider: what the probe reports, checked against references
 * nxr does not compute -- the library file the process linked (Debian
 * installs each threading model in its own directory), a thread count the
 * test set itself, and a core the test forced in a child process through
 * OPENBLAS_CORETYPE -- then the classification rules, the fallback-core
 * diagnosis, GEMM results, and OpenBLAS's process-global thread count: the
 * same before and after every call through nxr, set and restored by the
 * guard, never exceeded by a call.
 *
 * OPENBLAS_CORETYPE is set only in the probe's child processes: in this
 * process it would make the probe describe a forced core.
 */
#include <cblas.h>
#include <criterion/criterion.h>
#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "kernels/internal/openblas.h"
#include "kernels/internal/provider.h"
#include "kernels/internal/rules.h"
#include "ref.h"

/* ---- the probe ------------------------------------------------------------------------ */

#define PROBE_CHILD_ENV "NXR_TEST_OPENBLAS_PROBE_CHILD"

/* In a child started by probe_in_child: OpenBLAS has read OPENBLAS_CORETYPE
 * in its own constructor (shared libraries initialise before the program),
 * so the probe sees the forced core. Prints it and exits before Criterion
 * starts. */
__attribute__((constructor)) static void probe_child_main(void)
{
    if (getenv(PROBE_CHILD_ENV) == NULL)
        return;
    struct nxr_openblas_info info;
    nxr_openblas_probe(&info);
    printf("core=%s\nfallback=%d\nconfig=%s\ndiagnostic=%s\n", info.core, info.core_fallback,
           info.config, info.diagnostic);
    fflush(stdout);
    _exit(0);
}

struct child_probe {
    char core[64];
    int fallback;
    char config[256];
    char diagnostic[512];
};

static void field(const char *out, const char *key, char *dst, size_t size)
{
    const char *p = strstr(out, key);
    cr_assert_not_null(p, "no '%s' in the child's output: %s", key, out);
    p += strlen(key);
    size_t n = strcspn(p, "\n");
    cr_assert_lt(n, size);
    memcpy(dst, p, n);
    dst[n] = '\0';
}

/* Runs this test binary again with OPENBLAS_CORETYPE=coretype and reads
 * what the probe reported there. */
static struct child_probe probe_in_child(const char *coretype)
{
    char self[PATH_MAX];
    ssize_t len = readlink("/proc/self/exe", self, sizeof self - 1);
    cr_assert_gt(len, 0);
    self[len] = '\0';
    int fds[2];
    cr_assert_eq(pipe(fds), 0);
    pid_t pid = fork();
    cr_assert_geq(pid, 0);
    if (pid == 0) {
        dup2(fds[1], STDOUT_FILENO);
        close(fds[0]);
        close(fds[1]);
        setenv("OPENBLAS_CORETYPE", coretype, 1);
        setenv(PROBE_CHILD_ENV, "1", 1);
        char *argv[] = {self, NULL};
        execv(self, argv);
        _exit(127);
    }
    close(fds[1]);
    char out[2048];
    size_t got = 0;
    ssize_t r;
    while (got < sizeof out - 1 && (r = read(fds[0], out + got, sizeof out - 1 - got)) > 0)
        got += (size_t)r;
    out[got] = '\0';
    close(fds[0]);
    int status;
    cr_assert_eq(waitpid(pid, &status, 0), pid);
    cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0, "probe child: status %d", status);
    struct child_probe c;
    char flag[8];
    field(out, "core=", c.core, sizeof c.core);
    field(out, "fallback=", flag, sizeof flag);
    c.fallback = atoi(flag);
    field(out, "config=", c.config, sizeof c.config);
    field(out, "diagnostic=", c.diagnostic, sizeof c.diagnostic);
    return c;
}

/* Only a DYNAMIC_ARCH build chooses its kernels at load time (and honours
 * OPENBLAS_CORETYPE). */
static void need_dynamic_arch(void)
{
    if (strstr(openblas_get_config(), "DYNAMIC_ARCH") == NULL)
        cr_skip_test("OpenBLAS built for one core (no DYNAMIC_ARCH): OPENBLAS_CORETYPE is ignored");
}

/* What this CPU can run, asked of the compiler's runtime, not of nxr. */
static bool cpu_has_avx2_fma(void)
{
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
}

/* Prescott's kernels are SSE3: on a CPU with AVX2 and FMA (two tiers up, or
 * more) that is the fallback the diagnosis exists for. */
Test(kernels_openblas, a_forced_old_core_is_reported_and_diagnosed_as_a_fallback)
{
    need_dynamic_arch();
    struct child_probe c = probe_in_child("Prescott");
    cr_assert_str_eq(c.core, "Prescott", "the probe reports the core the library runs");
    cr_assert_not_null(strstr(c.config, "Prescott"), "config: %s", c.config);
    if (!cpu_has_avx2_fma()) {
        cr_assert_eq(c.fallback, 0, "an SSE-era CPU: Prescott is its own tier");
        return;
    }
    cr_assert_eq(c.fallback, 1, "Prescott kernels on an AVX2 CPU are a fallback");
    cr_assert_not_null(strstr(c.diagnostic, "Prescott"), "diagnostic: %s", c.diagnostic);
}

/* Haswell's kernels on a CPU that runs them (AVX2 or AVX-512: at most one
 * tier down) are what OpenBLAS should pick: no diagnosis. */
Test(kernels_openblas, a_matching_core_is_not_a_fallback)
{
    need_dynamic_arch();
    if (!cpu_has_avx2_fma())
        cr_skip_test("this CPU cannot run OpenBLAS's Haswell kernels");
    struct child_probe c = probe_in_child("Haswell");
    cr_assert_str_eq(c.core, "Haswell");
    cr_assert_eq(c.fallback, 0);
    cr_assert_str_eq(c.diagnostic, "");
}

/* Debian installs each OpenBLAS threading model in its own directory
 * (openblas-pthread, openblas-openmp, openblas-serial); the file that
 * provides cblas_sgemm says which one this process linked. */
static const char *linked_model(char *path, size_t size)
{
    Dl_info dl;
    cr_assert_neq(dladdr((void *)cblas_sgemm, &dl), 0);
    char *real = realpath(dl.dli_fname, NULL);
    snprintf(path, size, "%s", real != NULL ? real : dl.dli_fname);
    free(real);
    if (strstr(path, "openblas-pthread") != NULL)
        return "pthread";
    if (strstr(path, "openblas-openmp") != NULL)
        return "openmp";
    if (strstr(path, "openblas-serial") != NULL)
        return "serial";
    return NULL;
}

Test(kernels_openblas, probe_reports_the_threading_model_of_the_linked_library)
{
    char path[PATH_MAX];
    const char *model = linked_model(path, sizeof path);
    if (model == NULL)
        cr_skip_test("cannot tell the threading model from the library's path %s", path);
    struct nxr_openblas_info info;
    nxr_openblas_probe(&info);
    nxr_provider_t *p;
    cr_assert_eq(nxr_provider_openblas_create(&p), 0);
    cr_assert(nxr_provider_is_foreign(p));
    if (strcmp(model, "serial") == 0) {
        cr_assert_eq(info.threading, NXR_OPENBLAS_SEQUENTIAL, "%s", path);
        cr_assert_eq(info.count, NXR_COUNT_SEQUENTIAL);
        cr_assert_eq(info.runs_on, NXR_RUNS_ON_CALLING_THREAD);
        cr_assert_eq(nxr_provider_count_control(p), NXR_COUNT_SEQUENTIAL);
        cr_assert_eq(nxr_provider_runs_on(p), NXR_RUNS_ON_CALLING_THREAD);
    } else {
        cr_assert_eq(info.threading,
                     strcmp(model, "pthread") == 0 ? NXR_OPENBLAS_PTHREADS : NXR_OPENBLAS_OPENMP,
                     "%s", path);
        /* Its thread count is process-global and its workers are its own. */
        cr_assert_eq(info.count, NXR_COUNT_GLOBAL_OR_UNCONTROLLED);
        cr_assert_eq(info.runs_on, NXR_RUNS_ON_EXTERNAL_WORKERS);
        cr_assert_eq(nxr_provider_count_control(p), NXR_COUNT_GLOBAL_OR_UNCONTROLLED);
        cr_assert_eq(nxr_provider_runs_on(p), NXR_RUNS_ON_EXTERNAL_WORKERS);
    }
    nxr_provider_destroy(p);
}

/* The count the probe reports is the one the process set last. */
Test(kernels_openblas, probe_reports_the_count_the_process_set)
{
    char path[PATH_MAX];
    const char *model = linked_model(path, sizeof path);
    if (model == NULL || strcmp(model, "serial") == 0)
        cr_skip_test("no settable thread count (%s)", path);
    const int original = openblas_get_num_threads();
    const int counts[] = {1, 2, 3};
    for (size_t i = 0; i < 3; i++) {
        openblas_set_num_threads(counts[i]);
        struct nxr_openblas_info info;
        nxr_openblas_probe(&info);
        cr_assert_eq(info.threads, counts[i]);
    }
    openblas_set_num_threads(original);
}

Test(kernels_openblas, classification_of_each_threading_model)
{
    enum nxr_openblas_threading t;
    enum nxr_count_control c;
    enum nxr_provider_runs_on pl;
    nxr__openblas_classify(0, &t, &c, &pl);
    cr_assert(t == NXR_OPENBLAS_SEQUENTIAL && c == NXR_COUNT_SEQUENTIAL &&
              pl == NXR_RUNS_ON_CALLING_THREAD);
    nxr__openblas_classify(1, &t, &c, &pl);
    cr_assert(t == NXR_OPENBLAS_PTHREADS && c == NXR_COUNT_GLOBAL_OR_UNCONTROLLED &&
              pl == NXR_RUNS_ON_EXTERNAL_WORKERS);
    nxr__openblas_classify(2, &t, &c, &pl);
    cr_assert(t == NXR_OPENBLAS_OPENMP && c == NXR_COUNT_GLOBAL_OR_UNCONTROLLED &&
              pl == NXR_RUNS_ON_EXTERNAL_WORKERS);
    nxr__openblas_classify(9, &t, &c, &pl);
    cr_assert(t == NXR_OPENBLAS_UNKNOWN && c == NXR_COUNT_GLOBAL_OR_UNCONTROLLED);
}

Test(kernels_openblas, fallback_core_diagnosis)
{
    char msg[256];
    cr_assert(nxr__openblas_core_fallback("Prescott", NXR_TIER_AVX512, msg, sizeof msg));
    cr_assert_not_null(strstr(msg, "Prescott"));
    cr_assert(nxr__openblas_core_fallback("PRESCOTT", NXR_TIER_AVX2, msg, sizeof msg));
    cr_assert(nxr__openblas_core_fallback("Sandybridge", NXR_TIER_AVX512, msg, sizeof msg));
    cr_assert(nxr__openblas_core_fallback("Nehalem", NXR_TIER_AVX2, msg, sizeof msg));
    /* Matching or one tier below is normal (Haswell kernels on Zen 4). */
    cr_assert_not(nxr__openblas_core_fallback("Cooperlake", NXR_TIER_AVX512, msg, sizeof msg));
    cr_assert_str_eq(msg, "");
    cr_assert_not(nxr__openblas_core_fallback("Haswell", NXR_TIER_AVX512, msg, sizeof msg));
    cr_assert_not(nxr__openblas_core_fallback("Zen", NXR_TIER_AVX2, msg, sizeof msg));
    cr_assert_not(nxr__openblas_core_fallback("Prescott", NXR_TIER_SSE, msg, sizeof msg));
    /* Unknown names or CPUs never flag. */
    cr_assert_not(nxr__openblas_core_fallback("NeoverseV2", NXR_TIER_AVX512, msg, sizeof msg));
    cr_assert_not(nxr__openblas_core_fallback("Prescott", NXR_TIER_UNKNOWN, msg, sizeof msg));
}

/* ---- calls and the global count ------------------------------------------------------ */

struct fixture {
    nxr_provider_t *p;
    nxr_provider_bundle_t *b;
    float a[65 * 33], bm[33 * 7], c[65 * 7];
    struct nxr_sgemm_args g;
};

static void setup(struct fixture *f)
{
    cr_assert_eq(nxr_provider_openblas_create(&f->p), 0);
    struct nxr_provider_bundle_opts o;
    nxr_provider_bundle_opts_init(&o);
    o.providers[NXR_FAMILY_GEMM] = f->p;
    cr_assert_eq(nxr_provider_bundle_create(&o, &f->b), 0);
    uint64_t s = 5;
    for (size_t i = 0; i < sizeof f->a / sizeof f->a[0]; ++i)
        f->a[i] = ref_uniform(&s, -1, 1);
    for (size_t i = 0; i < sizeof f->bm / sizeof f->bm[0]; ++i)
        f->bm[i] = ref_uniform(&s, -1, 1);
    f->g = (struct nxr_sgemm_args){.m = 65,
                              .n = 7,
                              .k = 33,
                              .alpha = 1,
                              .a = f->a,
                              .lda = 33,
                              .b = f->bm,
                              .ldb = 7,
                              .beta = 0,
                              .c = f->c,
                              .ldc = 7};
}

static void teardown(struct fixture *f)
{
    nxr_provider_bundle_destroy(f->b);
    nxr_provider_destroy(f->p);
}

static void check_result(const struct fixture *f)
{
    for (size_t i = 0; i < 65; ++i)
        for (size_t j = 0; j < 7; ++j) {
            double dot = 0, mag = 0;
            for (size_t k = 0; k < 33; ++k) {
                dot += (double)f->a[i * 33 + k] * f->bm[k * 7 + j];
                mag += fabs((double)f->a[i * 33 + k] * f->bm[k * 7 + j]);
            }
            cr_assert(fabs(f->c[i * 7 + j] - dot) <= 2.0 * 35 * U_F32 * mag);
        }
}

Test(kernels_openblas, count_is_unchanged_by_calls_through_nxr)
{
    struct fixture f;
    setup(&f);
    const int before = openblas_get_num_threads();
    const struct nxr_kernel_call call = {.threads = (unsigned)before};
    cr_assert_eq(nxr__bundle_sgemm(f.b, &call, &f.g), 0, "no FP environment change either");
    check_result(&f);
    struct nxr_sgemm_batch_args batch = {.gemm = f.g, .batch = 2};
    cr_assert_eq(nxr__bundle_sgemm_batch(f.b, &call, &batch), 0);
    cr_assert_eq(openblas_get_num_threads(), before);
    teardown(&f);
}

struct guarded {
    struct fixture *f;
    unsigned threads;
    int seen;
    int rc;
    bool meddle; /* the call changes the count itself */
};

static int guarded_call(void *arg)
{
    struct guarded *g = arg;
    g->seen = openblas_get_num_threads();
    const struct nxr_kernel_call call = {.threads = g->threads};
    g->rc = nxr__bundle_sgemm(g->f->b, &call, &g->f->g);
    if (g->meddle)
        openblas_set_num_threads(g->seen + 1);
    return g->rc;
}

/* What the exclusive-permit path does: count = budget, restore after. */
Test(kernels_openblas, guard_sets_the_budget_and_restores)
{
    struct fixture f;
    setup(&f);
    if (nxr_provider_count_control(f.p) != NXR_COUNT_GLOBAL_OR_UNCONTROLLED)
        cr_skip_test("sequential OpenBLAS: no global count to guard");
    const int before = openblas_get_num_threads();
    struct guarded g = {.f = &f, .threads = 1};
    cr_assert_eq(nxr__global_threads_run(f.p, 1, guarded_call, &g), 0);
    cr_assert_eq(g.seen, 1);
    check_result(&f);
    cr_assert_eq(openblas_get_num_threads(), before);

    g = (struct guarded){.f = &f, .threads = 2, .meddle = true};
    cr_assert_eq(nxr__global_threads_run(f.p, 2, guarded_call, &g), 0);
    cr_assert_eq(g.seen, 2);
    cr_assert_eq(openblas_get_num_threads(), before, "restored even after the call moved it");
    teardown(&f);
}

/* A call never runs wider than it was granted. */
Test(kernels_openblas, count_above_the_grant_is_eplacement)
{
    struct fixture f;
    setup(&f);
    if (nxr_provider_count_control(f.p) != NXR_COUNT_GLOBAL_OR_UNCONTROLLED)
        cr_skip_test("sequential OpenBLAS: always one thread");
    const int before = openblas_get_num_threads();
    struct guarded g = {.f = &f, .threads = 1};
    cr_assert_eq(nxr__global_threads_run(f.p, 2, guarded_call, &g), NXR_EPLACEMENT);
    cr_assert_eq(openblas_get_num_threads(), before);
    teardown(&f);
}

Test(kernels_openblas, guard_rejects_bad_arguments)
{
    struct fixture f;
    setup(&f);
    struct guarded g = {.f = &f, .threads = 1};
    cr_assert_eq(nxr__global_threads_run(f.p, 0, guarded_call, &g), -EINVAL);
    nxr_provider_t *native;
    cr_assert_eq(nxr_provider_native_create(NXR_FAMILY_GEMM, &native), 0);
    cr_assert_eq(nxr__global_threads_run(native, 1, guarded_call, &g), -EINVAL,
                 "no global count to set");
    nxr_provider_destroy(native);
    teardown(&f);
}

/* This process's OpenBLAS through the rules: strict placement, with the
 * domain being the whole allowed set, runs it at its own count. */
Test(kernels_openblas, rules_for_this_process)
{
    struct fixture f;
    setup(&f);
    if (nxr_provider_count_control(f.p) != NXR_COUNT_GLOBAL_OR_UNCONTROLLED)
        cr_skip_test("sequential OpenBLAS");
    const int count = openblas_get_num_threads();
    struct nxr__run_decision d =
        nxr__provider_decide_now(f.p, (unsigned)count, false, NXR_PROVIDER_STRICT);
    if (count == 1)
        cr_assert_eq(d.run, NXR_RUN_INLINE);
    else
        cr_assert_eq(d.status, NXR_EPLACEMENT);
    d = nxr__provider_decide_now(f.p, (unsigned)count, true, NXR_PROVIDER_STRICT);
    cr_assert_eq(d.run, count == 1 ? NXR_RUN_INLINE : NXR_RUN_DOMAIN);
    cr_assert_eq(openblas_get_num_threads(), count);
    teardown(&f);
}

Test(kernels_openblas, oversized_dimensions_are_eunsupported)
{
    struct fixture f;
    setup(&f);
    const struct nxr_kernel_call call = {.threads = 64};
    struct nxr_sgemm_args g = f.g;
    g.alpha = 0; /* nothing is read, but cblas cannot express the size */
    g.n = (size_t)1 << 32;
    g.ldc = g.n;
    cr_assert_eq(nxr__bundle_sgemm(f.b, &call, &g), NXR_EUNSUPPORTED);
    teardown(&f);
}
