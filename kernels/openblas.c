/*
 * nxr's OpenBLAS provider: the probe (threading model, core, config,
 * thread count, fallback detection) and the GEMM ops over cblas_sgemm.
 *
 * Debian's default libopenblas is the pthreads build: its thread count is
 * process-global and a call with a count above one runs on OpenBLAS's own
 * workers, so the provider is GLOBAL_OR_UNCONTROLLED x EXTERNAL_WORKERS and
 * the placement rules (kernels/internal/rules.h) decide where it may run.
 * The provider itself never changes the count; the exclusive-permit path
 * does, through nxr__global_threads_run, and restores it.
 *
 * nxr does not link OpenBLAS: it loads it (dlopen) the first time the
 * provider is created or the library is probed. Loading runs OpenBLAS's
 * constructor, and the pthreads build starts its worker threads there, before
 * any call: linked, every process with libnxr had one more thread per CPU
 * from its first instruction, whether it ever used OpenBLAS or not. A
 * runtime only looks at an OpenBLAS the process already has
 * (nxr__openblas_probe_loaded, RTLD_NOLOAD); nxr_runtime_describe loads it to
 * report it, since that was asked for.
 */
#include <cblas.h>
#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "base/internal/last_error.h"
#include "kernels/internal/native.h"
#include "kernels/internal/openblas.h"
#include "kernels/internal/provider.h"

/* The library's entry points nxr uses, resolved once (pthread_once), then
 * read-only: any thread may call through them. */
static struct {
    void *handle; /* NULL: no OpenBLAS on this system */
    int (*get_parallel)(void);
    int (*get_num_threads)(void);
    void (*set_num_threads)(int);
    char *(*get_corename)(void);
    char *(*get_config)(void);
    void (*sgemm)(enum CBLAS_ORDER, enum CBLAS_TRANSPOSE, enum CBLAS_TRANSPOSE, blasint, blasint,
                  blasint, float, const float *, blasint, const float *, blasint, float, float *,
                  blasint);
} ob;

static pthread_once_t ob_once = PTHREAD_ONCE_INIT;

/* Debian's soname (every threading model installs it, through alternatives). */
#define OB_SONAME "libopenblas.so.0"

static void ob_load(void)
{
    void *h = dlopen(OB_SONAME, RTLD_NOW | RTLD_LOCAL);
    if (h == NULL)
        return;
    /* POSIX allows object -> function pointers through dlsym's void *. */
    *(void **)&ob.get_parallel = dlsym(h, "openblas_get_parallel");
    *(void **)&ob.get_num_threads = dlsym(h, "openblas_get_num_threads");
    *(void **)&ob.set_num_threads = dlsym(h, "openblas_set_num_threads");
    *(void **)&ob.get_corename = dlsym(h, "openblas_get_corename");
    *(void **)&ob.get_config = dlsym(h, "openblas_get_config");
    *(void **)&ob.sgemm = dlsym(h, "cblas_sgemm");
    if (ob.get_parallel == NULL || ob.get_num_threads == NULL || ob.set_num_threads == NULL ||
        ob.get_corename == NULL || ob.get_config == NULL || ob.sgemm == NULL) {
        dlclose(h); /* not an OpenBLAS nxr can drive */
        return;
    }
    ob.handle = h;
}

/* Loads OpenBLAS into the process if it is not there yet (its threads start
 * then); false when the system has none. */
static bool ob_present(void)
{
    pthread_once(&ob_once, ob_load);
    return ob.handle != NULL;
}

bool nxr__openblas_loaded(void)
{
    void *h = dlopen(OB_SONAME, RTLD_NOW | RTLD_NOLOAD);
    if (h == NULL)
        return false;
    dlclose(h); /* drops the reference NOLOAD took */
    return true;
}

void nxr__openblas_classify(int parallel, enum nxr_openblas_threading *threading,
                            enum nxr_count_control *count, enum nxr_provider_runs_on *placement)
{
    switch (parallel) {
    case 0:
        *threading = NXR_OPENBLAS_SEQUENTIAL;
        *count = NXR_COUNT_SEQUENTIAL;
        *placement = NXR_RUNS_ON_CALLING_THREAD;
        return;
    case 1:
        *threading = NXR_OPENBLAS_PTHREADS;
        break;
    case 2:
        *threading = NXR_OPENBLAS_OPENMP;
        break;
    default:
        *threading = NXR_OPENBLAS_UNKNOWN;
        break;
    }
    *count = NXR_COUNT_GLOBAL_OR_UNCONTROLLED;
    *placement = NXR_RUNS_ON_EXTERNAL_WORKERS;
}

/* OpenBLAS's x86-64 core names (driver/others/dynamic.c) by kernel ISA. */
static const struct {
    const char *core;
    enum nxr__isa_tier tier;
} core_tiers[] = {
    {"katmai", NXR_TIER_SSE},        {"coppermine", NXR_TIER_SSE},
    {"northwood", NXR_TIER_SSE},     {"prescott", NXR_TIER_SSE},
    {"banias", NXR_TIER_SSE},        {"atom", NXR_TIER_SSE},
    {"core2", NXR_TIER_SSE},         {"penryn", NXR_TIER_SSE},
    {"dunnington", NXR_TIER_SSE},    {"nehalem", NXR_TIER_SSE},
    {"athlon", NXR_TIER_SSE},        {"opteron", NXR_TIER_SSE},
    {"opteron_sse3", NXR_TIER_SSE},  {"barcelona", NXR_TIER_SSE},
    {"nano", NXR_TIER_SSE},          {"bobcat", NXR_TIER_SSE},
    {"sandybridge", NXR_TIER_AVX},   {"bulldozer", NXR_TIER_AVX},
    {"piledriver", NXR_TIER_AVX},    {"steamroller", NXR_TIER_AVX},
    {"haswell", NXR_TIER_AVX2},      {"excavator", NXR_TIER_AVX2},
    {"zen", NXR_TIER_AVX2},          {"skylakex", NXR_TIER_AVX512},
    {"cooperlake", NXR_TIER_AVX512}, {"sapphirerapids", NXR_TIER_AVX512},
};

enum nxr__isa_tier nxr__openblas_core_tier(const char *core)
{
    if (core == NULL)
        return NXR_TIER_UNKNOWN;
    for (size_t i = 0; i < sizeof core_tiers / sizeof core_tiers[0]; ++i)
        if (strcasecmp(core, core_tiers[i].core) == 0)
            return core_tiers[i].tier;
    return NXR_TIER_UNKNOWN;
}

const char *nxr__isa_tier_name(enum nxr__isa_tier tier)
{
    switch (tier) {
    case NXR_TIER_UNKNOWN:
        return "unknown";
    case NXR_TIER_SSE:
        return "SSE";
    case NXR_TIER_AVX:
        return "AVX";
    case NXR_TIER_AVX2:
        return "AVX2+FMA";
    case NXR_TIER_AVX512:
        return "AVX-512";
    }
    return "?";
}

bool nxr__openblas_core_fallback(const char *core, enum nxr__isa_tier cpu, char *msg,
                                 size_t msg_size)
{
    const enum nxr__isa_tier have = nxr__openblas_core_tier(core);
    const bool fallback =
        have != NXR_TIER_UNKNOWN && cpu != NXR_TIER_UNKNOWN && (int)cpu - (int)have >= 2;
    if (msg != NULL && msg_size > 0) {
        if (fallback)
            snprintf(msg, msg_size,
                     "OpenBLAS runs its %s kernels (%s) on a CPU with %s: it fell back "
                     "(OPENBLAS_CORETYPE, or a CPU this OpenBLAS does not know); GEMM is "
                     "several times slower than it could be",
                     core, nxr__isa_tier_name(have), nxr__isa_tier_name(cpu));
        else
            msg[0] = '\0';
    }
    return fallback;
}

static void copy_string(char *dst, size_t size, const char *src)
{
    snprintf(dst, size, "%s", src != NULL ? src : "");
}

void nxr__openblas_probe_loaded(struct nxr_openblas_info *out)
{
    if (nxr__openblas_loaded()) {
        nxr_openblas_probe(out);
        return;
    }
    memset(out, 0, sizeof *out);
    out->threading = NXR_OPENBLAS_UNKNOWN;
}

void nxr_openblas_probe(struct nxr_openblas_info *out)
{
    if (out == NULL)
        return;
    memset(out, 0, sizeof *out);
    if (!ob_present()) {
        out->threading = NXR_OPENBLAS_UNKNOWN;
        copy_string(out->diagnostic, sizeof out->diagnostic, "no " OB_SONAME " on this system");
        return;
    }
    out->present = true;
    out->parallel = ob.get_parallel();
    nxr__openblas_classify(out->parallel, &out->threading, &out->count, &out->runs_on);
    /* The resting count: another runtime's exclusive call may have set its
     * budget for the moment (kernels/global_count.c). */
    out->threads = nxr__global_count_read(ob.get_num_threads);
    copy_string(out->core, sizeof out->core, ob.get_corename());
    copy_string(out->config, sizeof out->config, ob.get_config());
    out->core_fallback = nxr__openblas_core_fallback(out->core, nxr__cpu_tier(), out->diagnostic,
                                                     sizeof out->diagnostic);
}

/* ---- the provider ----------------------------------------------------------- */

static int ob_get_threads(void *self)
{
    (void)self;
    return ob.get_num_threads();
}

static void ob_set_threads(void *self, int count)
{
    (void)self;
    ob.set_num_threads(count);
}

static const struct nxr_global_threads_ops ob_threads_ops = {
    .get = ob_get_threads,
    .set = ob_set_threads,
};

/* self: the classification, fixed at creation (non-NULL only for GLOBAL
 * builds, where the count check below applies). */
struct ob_self {
    bool global_count;
};

static size_t at_least(size_t ld, size_t need)
{
    if (need < 1)
        need = 1;
    return ld < need ? need : ld;
}

static int ob_sgemm(void *self, const struct nxr_kernel_call *call, const struct nxr_sgemm_args *g)
{
    const struct ob_self *s = self;
    if (call == NULL || call->threads == 0)
        return -EINVAL;
    int rc = nxr__sgemm_args_check(g);
    if (rc != 0)
        return rc;
    if (g->m == 0 || g->n == 0)
        return 0;
    /* cblas takes int: a valid request OpenBLAS's interface cannot express. */
    if (g->m > INT_MAX || g->n > INT_MAX || g->k > INT_MAX || g->lda > INT_MAX ||
        g->ldb > INT_MAX || g->ldc > INT_MAX)
        return NXR_EUNSUPPORTED;
    /* Never wider than granted: with the count above the call's threads,
     * OpenBLAS would run on workers nobody admitted. */
    if (s->global_count && ob.get_num_threads() > (int)call->threads)
        return NXR_EPLACEMENT;
    /* Operands that are not read still get leading dimensions cblas accepts
     * (it rejects, and prints, ld < max(1, rows of storage)). */
    const size_t lda = at_least(g->lda, g->trans_a ? g->m : g->k);
    const size_t ldb = at_least(g->ldb, g->trans_b ? g->k : g->n);
    ob.sgemm(CblasRowMajor, g->trans_a ? CblasTrans : CblasNoTrans,
                g->trans_b ? CblasTrans : CblasNoTrans, (int)g->m, (int)g->n, (int)g->k, g->alpha,
                g->a, (int)lda, g->b, (int)ldb, g->beta, g->c, (int)g->ldc);
    return 0;
}

/* The outer loop stays sequential: OpenBLAS cannot be forced sequential
 * per worker, so batching never fans out around it (one fan-out level). */
static int ob_sgemm_batch(void *self, const struct nxr_kernel_call *call,
                          const struct nxr_sgemm_batch_args *args)
{
    if (args == NULL)
        return -EINVAL;
    for (size_t i = 0; i < args->batch; ++i) {
        struct nxr_sgemm_args item = args->gemm;
        if (item.a != NULL)
            item.a += i * args->stride_a;
        if (item.b != NULL)
            item.b += i * args->stride_b;
        if (item.c != NULL)
            item.c += i * args->stride_c;
        const int rc = ob_sgemm(self, call, &item);
        if (rc != 0)
            return rc;
    }
    return 0;
}

static const struct nxr_gemm_ops ob_gemm_ops = {
    .sgemm_scratch = NULL,
    .sgemm = ob_sgemm,
    .sgemm_batch = ob_sgemm_batch,
};

static const struct ob_self ob_global = {.global_count = true};
static const struct ob_self ob_sequential = {.global_count = false};

int nxr_provider_openblas_create(nxr_provider_t **out)
{
    nxr__call_begin();
    if (out == NULL)
        return nxr__fail(-EINVAL, __func__, "out is NULL");
    *out = NULL;
    if (!ob_present())
        return nxr__fail(NXR_EUNSUPPORTED, __func__, "OpenBLAS could not be loaded");
    enum nxr_openblas_threading threading;
    struct nxr_provider_desc d;
    nxr_provider_desc_init(&d);
    nxr__openblas_classify(ob.get_parallel(), &threading, &d.count, &d.runs_on);
    d.name = "openblas";
    d.family = NXR_FAMILY_GEMM;
    d.gemm = &ob_gemm_ops;
    const bool global = d.count == NXR_COUNT_GLOBAL_OR_UNCONTROLLED;
    d.global_threads = global ? &ob_threads_ops : NULL;
    d.self = (void *)(global ? &ob_global : &ob_sequential); /* read-only */
    /* Foreign code: nxr checks the FP environment around its calls. */
    return nxr__provider_new(__func__, &d, true, out);
}
