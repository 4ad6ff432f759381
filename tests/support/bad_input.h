/*
 * The bad-input table's shared state and helpers, for the
 * tests/<package>/bad_input_test.c files (one translation unit each: this
 * header defines the table's runtime, context and error buffer).
 *
 * The table: every public function of runtime/nxr.h, executor/nxr_executor.h,
 * alloc/nxr_alloc.h, kernels/nxr_kernels.h and base/nxr_status.h that can
 * report an error, called with NULL handles and out-parameters, out-of-range
 * ids and enums, zero or oversized sizes, and overlapping or empty sets,
 * returns the error its header documents -- and hands nothing out
 * (out-parameters NULL). One test per row; functions documented as "NULL is
 * a no-op" are called with NULL too. Accessors that return a value rather
 * than a status (nxr_domain_id, nxr_buffer_size, ...) have no error to
 * report and require a valid handle; the rows cover their documented
 * out-of-range results instead. In checked builds (--config=asan or
 * --config=checked) a destroyed runtime or context is caught: the call
 * aborts with a message, which the runtime file's last rows check.
 *
 * Where the rows live (until issue 23 all 79 were in
 * tests/reliability/bad_input_test.c), by the package of the unit they call:
 *   tests/runtime/bad_input_test.c   runtime creation (settings, domains,
 *       declarations), lookups and contexts, describe, external domains
 *       (attach), kernel calls through a context and their preconditions
 *       (runtime/kernel_call.c, runtime/kernel_wrappers.c, kernels/args.c), placement, memory
 *       ownership and binding, enum names, destroyed handles
 *   tests/executor/bad_input_test.c  parallel_for, parallel_reduce, run,
 *       submit, job wait/detach
 *   tests/alloc/bad_input_test.c     pool classes, buffers, domain malloc,
 *       scopes, mem_node, host export
 *   tests/kernels/bad_input_test.c   provider descriptors, the native and
 *       OpenBLAS providers, bundles (no runtime)
 *   tests/base/bad_input_test.c      nxr_strerror of unknown codes
 */
#ifndef NXR_TESTS_BAD_INPUT_H
#define NXR_TESTS_BAD_INPUT_H

#include <criterion/criterion.h>
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>

#include "base/internal/sys.h"
#include "runtime/nxr.h"
#include "tests/support/cpus.h"
#include "tests/support/procfs.h"

/* The table's runtime and context (open_runtime), closed after each row
 * (teardown, the suites' .fini), and the detail of the last failed call. */
static nxr_runtime_t *rt;
static nxr_ctx_t *ctx;

__attribute__((unused)) static void teardown(void)
{
    nxr_ctx_destroy(ctx);
    nxr_runtime_destroy(rt);
    ctx = NULL;
    rt = NULL;
}

__attribute__((unused)) static void opts_of(struct nxr_runtime_opts *o)
{
    nxr_runtime_opts_init(o);
    o->ignore_env = true;
}

/* A runtime with domains 0 and 1 (the first allowed CPU, one of them
 * shared, so the table runs on one CPU too), and a context on 0. */
__attribute__((unused)) static void open_runtime(void)
{
    struct nxr_runtime_opts o;
    opts_of(&o);
    o.domains = nxr_test_expand("0:%0;1:%0 shared");
    cr_assert_eq(nxr_runtime_create(&o, &rt), 0, "%s", nxr_last_error());
    cr_assert_eq(nxr_ctx_create(rt, 0, &ctx), 0);
}

/* A no-op touches nothing: no call through the system seam (every point
 * armed to fail from the first call on) and no thread started or stopped. */
#define EXPECT_NO_OP(call)                                                                         \
    do {                                                                                           \
        int threads_ = nxr_test_thread_count();                                                    \
        nxr__fault_arm_from(NXR_FAULT_ALL, 1);                                                     \
        call;                                                                                      \
        long calls_ = nxr__fault_calls();                                                          \
        nxr__fault_arm(0, 0);                                                                      \
        cr_assert_eq(calls_, 0, #call " made %ld system calls", calls_);                           \
        cr_assert_eq(nxr_test_thread_count(), threads_, #call " changed the thread count");        \
    } while (0)

/* A loop body that counts its calls in *(int *)arg, and a task that does
 * nothing: the executor's rows and the runtime's destroyed-handle rows. */
__attribute__((unused)) static void body(void *arg, size_t b, size_t e, unsigned worker)
{
    (void)b, (void)e, (void)worker;
    (*(int *)arg)++;
}

__attribute__((unused)) static int task(void *arg, size_t index)
{
    (void)arg, (void)index;
    return 0;
}

#endif /* NXR_TESTS_BAD_INPUT_H */
