/*
 * The bad-input rows of the runtime's public functions: the table's rule, and where its
 * other rows live, are in tests/support/bad_input.h.
 */
#include "tests/support/bad_input.h"

TestSuite(runtime_bad_input, .fini = teardown, .timeout = 60);

static void expect_create(const struct nxr_runtime_opts *o, int want)
{
    nxr_runtime_t *out = (nxr_runtime_t *)0x1;
    int rc = nxr_runtime_create(o, &out);
    cr_assert_eq(rc, want, "got %d (%s), want %d (%s): %s", rc, nxr_strerror(rc), want,
                 nxr_strerror(want), nxr_last_error());
    cr_assert_null(out, "a failed create hands nothing out");
    cr_assert_neq(nxr_last_error()[0], '\0', "a failed create explains itself");
}

/* A CPU set from a tests/support/cpus.h template ("%0": the first allowed CPU). */
static hwloc_bitmap_t set_of(const char *tmpl)
{
    hwloc_bitmap_t s = hwloc_bitmap_alloc();
    cr_assert_eq(hwloc_bitmap_list_sscanf(s, nxr_test_expand(tmpl)), 0);
    return s;
}

/* Creation with one declared domain (cpus as a list, or NULL). */
static void expect_decl(int id, const char *cpus, int budget, int want)
{
    struct nxr_domain_decl d;
    nxr_domain_decl_init(&d);
    d.id = id;
    hwloc_bitmap_t set = cpus != NULL ? set_of(cpus) : NULL;
    d.cpus = set;
    d.budget = budget;
    struct nxr_runtime_opts o;
    opts_of(&o);
    o.domain_decls = &d;
    o.domain_decl_count = 1;
    expect_create(&o, want);
    if (set != NULL)
        hwloc_bitmap_free(set);
}

/* ---- runtime creation --------------------------------------------------- */

Test(runtime_bad_input, runtime_create_null_out_is_einval)
{
    cr_assert_eq(nxr_runtime_create(NULL, NULL), -EINVAL);
}

Test(runtime_bad_input, runtime_create_domains_and_decls_both_set_is_einval)
{
    struct nxr_domain_decl d;
    nxr_domain_decl_init(&d);
    struct nxr_runtime_opts o;
    opts_of(&o);
    o.domains = nxr_test_expand("0:%0");
    o.domain_decls = &d;
    o.domain_decl_count = 1;
    expect_create(&o, -EINVAL);
}

Test(runtime_bad_input, runtime_create_negative_num_threads_is_einval)
{
    struct nxr_runtime_opts o;
    opts_of(&o);
    o.num_threads = -1;
    expect_create(&o, -EINVAL);
}

Test(runtime_bad_input, runtime_create_spin_below_minus_one_is_einval)
{
    struct nxr_runtime_opts o;
    opts_of(&o);
    o.spin = -2;
    expect_create(&o, -EINVAL);
}

Test(runtime_bad_input, runtime_create_provider_policy_out_of_range_is_einval)
{
    struct nxr_runtime_opts o;
    opts_of(&o);
    o.provider_policy = NXR_PROVIDER_PROCESS_EXCLUSIVE + 1;
    expect_create(&o, -EINVAL);
}

Test(runtime_bad_input, runtime_create_malformed_topology_is_esyntax)
{
    struct nxr_runtime_opts o;
    opts_of(&o);
    o.topology = "sythetic:pu:2";
    expect_create(&o, NXR_ESYNTAX);
}

Test(runtime_bad_input, runtime_create_unloadable_topology_is_etopology)
{
    struct nxr_runtime_opts o;
    opts_of(&o);
    o.topology = "xml:/nonexistent/nxr-topology.xml";
    expect_create(&o, NXR_ETOPOLOGY);
}

Test(runtime_bad_input, runtime_create_malformed_domains_string_is_esyntax)
{
    struct nxr_runtime_opts o;
    opts_of(&o);
    o.domains = "0:";
    expect_create(&o, NXR_ESYNTAX);
}

Test(runtime_bad_input, runtime_create_zero_declarations_is_enodomain)
{
    struct nxr_domain_decl d;
    nxr_domain_decl_init(&d);
    struct nxr_runtime_opts o;
    opts_of(&o);
    o.domain_decls = &d;
    o.domain_decl_count = 0;
    expect_create(&o, NXR_ENODOMAIN);
}

Test(runtime_bad_input, runtime_create_null_or_empty_cpu_set_is_eemptyset)
{
    expect_decl(0, NULL, NXR_BUDGET_ALL, NXR_EEMPTYSET);
    expect_decl(0, "", NXR_BUDGET_ALL, NXR_EEMPTYSET);
}

Test(runtime_bad_input, runtime_create_negative_id_is_einval)
{
    expect_decl(-1, "%0", NXR_BUDGET_ALL, -EINVAL);
}

Test(runtime_bad_input, runtime_create_cpu_outside_allowed_is_edisallowed)
{
    expect_decl(0, "%0,4000", NXR_BUDGET_ALL, NXR_EDISALLOWED);
}

Test(runtime_bad_input, runtime_create_negative_or_oversized_budget_is_ebudget)
{
    expect_decl(0, "%0", -1, NXR_EBUDGET); /* 0.x's NXR_BUDGET_ALL; 0 now */
    expect_decl(0, "%0", -5, NXR_EBUDGET);
    expect_decl(0, "%0", 2, NXR_EBUDGET);
}

Test(runtime_bad_input, runtime_create_duplicate_ids_is_edupid)
{
    struct nxr_runtime_opts o;
    opts_of(&o);
    o.domains = nxr_test_expand("3:%0;3:%0");
    expect_create(&o, NXR_EDUPID);
}

Test(runtime_bad_input, runtime_create_overlapping_sets_is_eoverlap)
{
    struct nxr_runtime_opts o;
    opts_of(&o);
    o.domains = nxr_test_expand("0:%0;1:%0");
    expect_create(&o, NXR_EOVERLAP);
}

Test(runtime_bad_input, runtime_create_allowed_set_outside_the_machine_is_enodomain)
{
    hwloc_bitmap_t none = set_of("4000");
    struct nxr_runtime_opts o;
    opts_of(&o);
    o.allowed_cpus = none;
    expect_create(&o, NXR_ENODOMAIN);
    hwloc_bitmap_free(none);
}

Test(runtime_bad_input, runtime_destroy_null_is_a_no_op)
{
    EXPECT_NO_OP(nxr_runtime_destroy(NULL));
    EXPECT_NO_OP(nxr_ctx_destroy(NULL));
}

/* ---- lookups and contexts ----------------------------------------------- */

Test(runtime_bad_input, runtime_domain_null_arguments_are_einval)
{
    open_runtime();
    nxr_domain_t *d = (nxr_domain_t *)0x1;
    cr_assert_eq(nxr_runtime_domain(NULL, 0, &d), -EINVAL);
    cr_assert_null(d);
    cr_assert_eq(nxr_runtime_domain(rt, 0, NULL), -EINVAL);
}

Test(runtime_bad_input, runtime_domain_unknown_id_is_enodomain)
{
    open_runtime();
    static const int ids[] = {2, -1, INT_MAX, INT_MIN};
    for (size_t i = 0; i < sizeof(ids) / sizeof(ids[0]); i++) {
        nxr_domain_t *d = (nxr_domain_t *)0x1;
        cr_assert_eq(nxr_runtime_domain(rt, ids[i], &d), NXR_ENODOMAIN, "id %d", ids[i]);
        cr_assert_null(d);
    }
}

Test(runtime_bad_input, runtime_domain_at_out_of_range_is_null)
{
    open_runtime();
    cr_assert_null(nxr_runtime_domain_at(rt, nxr_runtime_domain_count(rt)));
    cr_assert_null(nxr_runtime_domain_at(rt, SIZE_MAX));
}

Test(runtime_bad_input, ctx_create_null_arguments_are_einval)
{
    open_runtime();
    nxr_ctx_t *c = (nxr_ctx_t *)0x1;
    cr_assert_eq(nxr_ctx_create(rt, 0, NULL), -EINVAL);
    cr_assert_eq(nxr_ctx_create(NULL, 0, &c), -EINVAL);
    cr_assert_null(c);
}

Test(runtime_bad_input, ctx_create_unknown_domain_is_enodomain)
{
    open_runtime();
    nxr_ctx_t *c = (nxr_ctx_t *)0x1;
    cr_assert_eq(nxr_ctx_create(rt, 7, &c), NXR_ENODOMAIN);
    cr_assert_null(c);
    cr_assert_eq(nxr_ctx_create(rt, -3, &c), NXR_ENODOMAIN);
    cr_assert_null(c);
}

Test(runtime_bad_input, describe_null_arguments_and_bad_format_are_einval)
{
    open_runtime();
    char *s = (char *)0x1;
    cr_assert_eq(nxr_runtime_describe(NULL, NXR_DESCRIBE_TEXT, &s), -EINVAL);
    cr_assert_null(s);
    cr_assert_eq(nxr_runtime_describe(rt, NXR_DESCRIBE_TEXT, NULL), -EINVAL);
    s = (char *)0x1;
    cr_assert_eq(nxr_runtime_describe(rt, (enum nxr_describe_format)7, &s), -EINVAL);
    cr_assert_null(s);
}

/* ---- external domains --------------------------------------------------- */

static int noop_install(void *self, nxr_region_fn fn, void *arg, unsigned count)
{
    (void)self;
    for (unsigned p = 0; p < count; p++)
        fn(arg, p, count);
    return 0;
}

static int noop_submit(void *self, nxr_item_fn fn, void *arg, size_t count, nxr_done_fn done,
                       void *done_arg)
{
    (void)self;
    for (size_t i = 0; i < count; i++)
        fn(arg, i);
    done(done_arg);
    return 0;
}

static void noop_retain(void *self)
{
    (void)self;
}

static const struct nxr_executor_ops inline_ops = {.install = noop_install, .submit = noop_submit};

/* A caller-managed declaration over an inline executor. */
static void caller_decl(struct nxr_external_decl *d, int id)
{
    nxr_external_decl_init(d);
    d->id = id;
    d->executor = (struct nxr_executor){.ops = &inline_ops, .workers = 1};
}

static void expect_attach(const struct nxr_external_decl *d, int want)
{
    size_t before = nxr_runtime_domain_count(rt);
    int rc = nxr_runtime_attach(rt, d);
    cr_assert_eq(rc, want, "got %d (%s), want %d (%s): %s", rc, nxr_strerror(rc), want,
                 nxr_strerror(want), nxr_last_error());
    cr_assert_eq(nxr_runtime_domain_count(rt), before, "a failed attach adds nothing");
}

Test(runtime_bad_input, attach_null_runtime_or_decl_is_einval)
{
    open_runtime();
    struct nxr_external_decl d;
    caller_decl(&d, 5);
    cr_assert_eq(nxr_runtime_attach(NULL, &d), -EINVAL);
    cr_assert_eq(nxr_runtime_attach(rt, NULL), -EINVAL);
}

Test(runtime_bad_input, attach_negative_id_or_bad_admission_is_einval)
{
    open_runtime();
    struct nxr_external_decl d;
    caller_decl(&d, -1);
    expect_attach(&d, -EINVAL);
    caller_decl(&d, 5);
    d.admission = NXR_ADMISSION_MANAGED;
    expect_attach(&d, -EINVAL);
    d.admission = (enum nxr_admission)9;
    expect_attach(&d, -EINVAL);
}

Test(runtime_bad_input, attach_caller_managed_with_a_cpu_set_is_einval)
{
    open_runtime();
    hwloc_bitmap_t one = set_of("%0");
    struct nxr_external_decl d;
    caller_decl(&d, 5);
    d.cpus = one;
    expect_attach(&d, -EINVAL);
    hwloc_bitmap_free(one);
}

Test(runtime_bad_input, attach_incomplete_executor_is_eexecutor)
{
    open_runtime();
    struct nxr_external_decl d;
    caller_decl(&d, 5);
    d.executor.ops = NULL;
    expect_attach(&d, NXR_EEXECUTOR);
    caller_decl(&d, 5);
    d.executor.workers = 0;
    expect_attach(&d, NXR_EEXECUTOR);
    static const struct nxr_executor_ops half = {
        .install = noop_install, .submit = noop_submit, .retain = noop_retain};
    caller_decl(&d, 5);
    d.executor.ops = &half;
    expect_attach(&d, NXR_EEXECUTOR);
}

Test(runtime_bad_input, attach_cooperative_null_or_empty_set_is_eemptyset)
{
    open_runtime();
    struct nxr_external_decl d;
    caller_decl(&d, 5);
    d.admission = NXR_ADMISSION_COOPERATIVE;
    expect_attach(&d, NXR_EEMPTYSET);
    hwloc_bitmap_t empty = hwloc_bitmap_alloc();
    d.cpus = empty;
    expect_attach(&d, NXR_EEMPTYSET);
    hwloc_bitmap_free(empty);
}

Test(runtime_bad_input, attach_cooperative_set_outside_allowed_is_edisallowed)
{
    open_runtime();
    hwloc_bitmap_t far = set_of("%0,4000");
    struct nxr_external_decl d;
    caller_decl(&d, 5);
    d.admission = NXR_ADMISSION_COOPERATIVE;
    d.cpus = far;
    expect_attach(&d, NXR_EDISALLOWED);
    hwloc_bitmap_free(far);
}

Test(runtime_bad_input, attach_negative_or_oversized_budget_is_ebudget)
{
    open_runtime();
    struct nxr_external_decl d;
    static const int budgets[] = {-1, -4, 2};
    for (size_t i = 0; i < 3; i++) {
        caller_decl(&d, 5);
        d.budget = budgets[i];
        expect_attach(&d, NXR_EBUDGET);
    }
}

Test(runtime_bad_input, attach_taken_id_is_edupid)
{
    open_runtime();
    struct nxr_external_decl d;
    caller_decl(&d, 1);
    expect_attach(&d, NXR_EDUPID);
}

static float xs[64], ys[64], outs[64];

Test(runtime_bad_input, kernels_with_a_null_ctx_are_einval)
{
    struct nxr_sgemm_args g = {.m = 1,
                          .n = 1,
                          .k = 1,
                          .alpha = 1,
                          .a = xs,
                          .lda = 1,
                          .b = ys,
                          .ldb = 1,
                          .c = outs,
                          .ldc = 1};
    struct nxr_sgemm_batch_args gb = {.gemm = g, .batch = 1};
    size_t at;
    cr_assert_eq(nxr_sgemm(NULL, &g), -EINVAL);
    cr_assert_eq(nxr_sgemm_batch(NULL, &gb), -EINVAL);
    cr_assert_eq(nxr_binary(NULL, NXR_BINARY_ADD, 4, xs, ys, outs), -EINVAL);
    cr_assert_eq(nxr_scale(NULL, 4, xs, 2, outs), -EINVAL);
    cr_assert_eq(nxr_unary(NULL, NXR_UNARY_SILU, 4, xs, outs), -EINVAL);
    cr_assert_eq(nxr_triad(NULL, 4, xs, ys, 2, outs), -EINVAL);
    cr_assert_eq(nxr_sum(NULL, 4, xs, outs), -EINVAL);
    cr_assert_eq(nxr_max(NULL, 4, xs, outs), -EINVAL);
    cr_assert_eq(nxr_argmax(NULL, 4, xs, &at), -EINVAL);
    cr_assert_eq(nxr_softmax(NULL, 2, 2, xs, 2, outs, 2), -EINVAL);
    cr_assert_eq(nxr_rmsnorm(NULL, 2, 2, xs, 2, NULL, 0, outs, 2), -EINVAL);
    cr_assert_eq(nxr_layernorm(NULL, 2, 2, xs, 2, NULL, NULL, 0, outs, 2), -EINVAL);
}

Test(runtime_bad_input, sgemm_null_args_matrices_or_short_leading_dimensions_are_einval)
{
    open_runtime();
    struct nxr_sgemm_args g = {.m = 2,
                          .n = 2,
                          .k = 2,
                          .alpha = 1,
                          .a = xs,
                          .lda = 2,
                          .b = ys,
                          .ldb = 2,
                          .c = outs,
                          .ldc = 2};
    cr_assert_eq(nxr_sgemm(ctx, NULL), -EINVAL);
    cr_assert_eq(nxr_sgemm_batch(ctx, NULL), -EINVAL);
    struct nxr_sgemm_args bad = g;
    bad.lda = 1;
    cr_assert_eq(nxr_sgemm(ctx, &bad), -EINVAL, "lda < k");
    bad = g;
    bad.ldc = 1;
    cr_assert_eq(nxr_sgemm(ctx, &bad), -EINVAL, "ldc < n");
    bad = g;
    bad.c = NULL;
    cr_assert_eq(nxr_sgemm(ctx, &bad), -EINVAL);
    bad = g;
    bad.a = NULL;
    cr_assert_eq(nxr_sgemm(ctx, &bad), -EINVAL);
}

Test(runtime_bad_input, sgemm_zero_sizes_touch_nothing)
{
    open_runtime();
    struct nxr_sgemm_args g = {.m = 0, .n = 0, .k = 0, .alpha = 1, .ldc = 1};
    cr_assert_eq(nxr_sgemm(ctx, &g), 0, "an empty C: nothing read or written");
}

/* An op outside its enum is bad input, named (issue 30, defect 19), not
 * NXR_EUNSUPPORTED ("no configured provider" is for an op of the enum the
 * provider lacks). */
static void expect_bad_op(int rc, const char *call, const char *enum_name)
{
    cr_expect_eq(rc, -EINVAL, "%s: got %d (%s)", call, rc, nxr_strerror(rc));
    char want[96];
    snprintf(want, sizeof(want), "%s: op 9 is not an enum %s", call, enum_name);
    cr_expect(strncmp(nxr_last_error(), want, strlen(want)) == 0, "the detail: %s",
              nxr_last_error());
}

Test(runtime_bad_input, elementwise_unknown_op_is_einval_naming_it_and_null_vectors_einval)
{
    open_runtime();
    expect_bad_op(nxr_binary(ctx, (enum nxr_binary_op)9, 4, xs, ys, outs), "nxr_binary",
                  "nxr_binary_op");
    expect_bad_op(nxr_unary(ctx, (enum nxr_unary_op)9, 4, xs, outs), "nxr_unary", "nxr_unary_op");
    expect_bad_op(nxr_binary_rows(ctx, (enum nxr_binary_op)9, 2, 2, xs, 2, ys, outs, 2),
                  "nxr_binary_rows", "nxr_binary_op");
    cr_assert_eq(nxr_binary(ctx, NXR_BINARY_ADD, 4, NULL, ys, outs), -EINVAL);
    cr_assert_eq(nxr_scale(ctx, 4, xs, 2, NULL), -EINVAL);
    cr_assert_eq(nxr_triad(ctx, 4, xs, ys, 2, NULL), -EINVAL);
}

Test(runtime_bad_input, reductions_of_nothing)
{
    open_runtime();
    float v = 1;
    size_t at = 7;
    cr_assert_eq(nxr_sum(ctx, 0, NULL, &v), 0);
    cr_assert_eq(v, 0.0f, "the sum of no floats is 0");
    cr_assert_eq(nxr_max(ctx, 0, xs, &v), -EINVAL);
    cr_assert_eq(nxr_argmax(ctx, 0, xs, &at), -EINVAL);
    cr_assert_eq(nxr_sum(ctx, 4, xs, NULL), -EINVAL);
}

Test(runtime_bad_input, norms_short_strides_zero_cols_or_negative_eps_are_einval)
{
    open_runtime();
    cr_assert_eq(nxr_softmax(ctx, 2, 4, xs, 3, outs, 4), -EINVAL, "ldx < cols");
    cr_assert_eq(nxr_softmax(ctx, 2, 4, xs, 4, outs, 3), -EINVAL, "ldo < cols");
    cr_assert_eq(nxr_softmax(ctx, 2, 0, xs, 4, outs, 4), -EINVAL, "zero columns");
    cr_assert_eq(nxr_rmsnorm(ctx, 2, 4, xs, 4, NULL, -1.0f, outs, 4), -EINVAL, "eps < 0");
    cr_assert_eq(nxr_layernorm(ctx, 2, 4, xs, 4, NULL, NULL, -1.0f, outs, 4), -EINVAL);
    cr_assert_eq(nxr_rmsnorm(ctx, 2, 4, NULL, 4, NULL, 0, outs, 4), -EINVAL);
}

/* ---- kernel preconditions (overlap and aliasing) ---------------------- */

/* A kernel that refused its arguments changed nothing: buf is as filled. */
static float pre[4096];

static void fill_pre(void)
{
    for (size_t i = 0; i < sizeof(pre) / sizeof(pre[0]); i++)
        pre[i] = (float)(i % 13) - 6.0f;
}

static void expect_pre_untouched(void)
{
    for (size_t i = 0; i < sizeof(pre) / sizeof(pre[0]); i++)
        cr_assert_eq(pre[i], (float)(i % 13) - 6.0f, "pre[%zu] was written", i);
}

static struct nxr_sgemm_args pre_gemm(void)
{
    return (struct nxr_sgemm_args){.m = 8, .n = 8, .k = 8, .alpha = 1, .a = pre, .lda = 8,
                              .b = pre + 1024, .ldb = 8, .c = pre + 2048, .ldc = 8};
}

Test(runtime_bad_input, sgemm_c_equal_to_or_overlapping_a_or_b_is_einval)
{
    open_runtime();
    fill_pre();
    struct nxr_sgemm_args g = pre_gemm();
    g.c = pre; /* C == A */
    cr_assert_eq(nxr_sgemm(ctx, &g), -EINVAL);
    g.c = pre + 8; /* C starts inside A */
    cr_assert_eq(nxr_sgemm(ctx, &g), -EINVAL);
    g = pre_gemm();
    g.c = pre + 1024 - 8; /* C's last rows run into B */
    cr_assert_eq(nxr_sgemm(ctx, &g), -EINVAL);
    g.c = pre + 1024; /* C == B */
    cr_assert_eq(nxr_sgemm(ctx, &g), -EINVAL);
    expect_pre_untouched();
}

Test(runtime_bad_input, elementwise_partial_aliasing_is_einval)
{
    open_runtime();
    fill_pre();
    cr_assert_eq(nxr_binary(ctx, NXR_BINARY_ADD, 64, pre, pre + 512, pre + 1), -EINVAL, "out in x");
    cr_assert_eq(nxr_binary(ctx, NXR_BINARY_MUL, 64, pre, pre + 512, pre + 500), -EINVAL,
                 "out runs into y");
    cr_assert_eq(nxr_scale(ctx, 64, pre, 2, pre + 63), -EINVAL);
    cr_assert_eq(nxr_unary(ctx, NXR_UNARY_GELU_TANH, 64, pre + 3, pre), -EINVAL);
    cr_assert_eq(nxr_triad(ctx, 64, pre + 990, pre + 2000, 2, pre + 1000), -EINVAL);
    expect_pre_untouched();
}

Test(runtime_bad_input, row_kernels_in_place_with_another_stride_or_partial_overlap_are_einval)
{
    open_runtime();
    fill_pre();
    cr_assert_eq(nxr_rmsnorm(ctx, 4, 8, pre, 8, NULL, 0, pre, 16), -EINVAL, "out == x, ldo != ldx");
    cr_assert_eq(nxr_layernorm(ctx, 4, 8, pre, 16, NULL, NULL, 0, pre, 8), -EINVAL);
    cr_assert_eq(nxr_softmax(ctx, 4, 8, pre, 8, pre + 8, 8), -EINVAL, "out one row into x");
    cr_assert_eq(nxr_rmsnorm(ctx, 4, 8, pre, 8, pre + 1000, 0, pre + 1000, 8), -EINVAL,
                 "gamma inside out");
    expect_pre_untouched();
}

Test(runtime_bad_input, sgemm_batch_with_shared_or_overlapping_c_items_is_einval)
{
    open_runtime();
    fill_pre();
    struct nxr_sgemm_batch_args b = {.gemm = pre_gemm(), .batch = 2, .stride_a = 64, .stride_b = 64};
    cr_assert_eq(nxr_sgemm_batch(ctx, &b), -EINVAL, "stride_c 0 with batch 2");
    b.stride_c = 63; /* item 1 starts on item 0's last element */
    cr_assert_eq(nxr_sgemm_batch(ctx, &b), -EINVAL);
    b.stride_c = 1; /* every element shared with a neighbour */
    cr_assert_eq(nxr_sgemm_batch(ctx, &b), -EINVAL);
    b.stride_c = 64;
    b.gemm.c = pre + 64; /* C items run over the A items */
    cr_assert_eq(nxr_sgemm_batch(ctx, &b), -EINVAL);
    expect_pre_untouched();
    b.batch = 1;
    b.stride_c = 0;
    b.gemm.c = pre + 2048;
    cr_assert_eq(nxr_sgemm_batch(ctx, &b), 0, "stride_c 0 is fine for one item");
}

Test(runtime_bad_input, binary_rows_bad_strides_null_operands_or_aliasing_are_einval)
{
    open_runtime();
    fill_pre();
    cr_assert_eq(nxr_binary_rows(NULL, NXR_BINARY_ADD, 2, 2, pre, 2, pre, pre, 2), -EINVAL);
    cr_assert_eq(nxr_binary_rows(ctx, NXR_BINARY_ADD, 2, 8, pre, 7, pre + 100, pre + 200, 8),
                 -EINVAL, "ldx < cols");
    cr_assert_eq(nxr_binary_rows(ctx, NXR_BINARY_ADD, 2, 8, pre, 8, pre + 100, pre + 200, 7),
                 -EINVAL, "ldo < cols");
    cr_assert_eq(nxr_binary_rows(ctx, NXR_BINARY_ADD, 2, 8, NULL, 8, pre + 100, pre + 200, 8),
                 -EINVAL);
    cr_assert_eq(nxr_binary_rows(ctx, NXR_BINARY_ADD, 2, 8, pre, 8, NULL, pre + 200, 8), -EINVAL);
    cr_assert_eq(nxr_binary_rows(ctx, NXR_BINARY_ADD, 2, 8, pre, 8, pre + 100, NULL, 8), -EINVAL);
    cr_assert_eq(nxr_binary_rows(ctx, NXR_BINARY_ADD, 2, 8, pre, 8, pre + 203, pre + 200, 8),
                 -EINVAL, "row inside out");
    cr_assert_eq(nxr_binary_rows(ctx, NXR_BINARY_ADD, 2, 8, pre, 8, pre + 100, pre + 4, 8),
                 -EINVAL, "out partly over x");
    cr_assert_eq(nxr_binary_rows(ctx, (enum nxr_binary_op)9, 2, 8, pre, 8, pre + 100, pre + 200, 8),
                 -EINVAL, "an op outside the enum");
    expect_pre_untouched();
}

Test(runtime_bad_input, sgemm_fused_bad_activation_or_bias_over_c_is_einval)
{
    open_runtime();
    fill_pre();
    struct nxr_sgemm_args g = pre_gemm();
    struct nxr_sgemm_epilogue ep = {.bias = pre + 2048 + 60, .activation = NXR_ACTIVATION_SILU};
    cr_assert_eq(nxr_sgemm_fused(ctx, &g, &ep), -EINVAL, "bias inside C");
    ep = (struct nxr_sgemm_epilogue){.bias = pre + 3000, .activation = (enum nxr_activation)3};
    cr_assert_eq(nxr_sgemm_fused(ctx, &g, &ep), -EINVAL, "not an activation");
    g.lda = 2;
    ep.activation = NXR_ACTIVATION_GELU_TANH;
    cr_assert_eq(nxr_sgemm_fused(ctx, &g, &ep), -EINVAL, "the GEMM's own rules too");
    cr_assert_eq(nxr_sgemm_fused(NULL, &g, &ep), -EINVAL);
    cr_assert_eq(nxr_sgemm_fused(ctx, NULL, &ep), -EINVAL);
    expect_pre_untouched();
}

/* ---- placement, memory ownership, binding ------------------------------ */

Test(runtime_bad_input, mem_domain_and_rehome_null_arguments)
{
    open_runtime();
    nxr_domain_t *d = (nxr_domain_t *)0x1;
    cr_assert_eq(nxr_mem_domain(NULL, xs, &d), -EINVAL);
    cr_assert_null(d);
    cr_assert_eq(nxr_mem_domain(rt, xs, NULL), -EINVAL);
    cr_assert_eq(nxr_mem_domain(rt, xs, &d), NXR_ENODOMAIN, "static data is not nxr's");
    cr_assert_eq(nxr_mem_domain(rt, NULL, &d), NXR_ENODOMAIN);
    nxr_domain_t *d0;
    cr_assert_eq(nxr_runtime_domain(rt, 0, &d0), 0);
    void *out = (void *)0x1;
    cr_assert_eq(nxr_mem_rehome(d0, xs, sizeof(xs), 0, NULL), -EINVAL);
    cr_assert_eq(nxr_mem_rehome(NULL, xs, sizeof(xs), 0, &out), -EINVAL);
    cr_assert_null(out);
    cr_assert_eq(nxr_mem_rehome(d0, NULL, 8, 0, &out), -EINVAL);
    cr_assert_eq(nxr_mem_rehome(d0, xs, 8, 3, &out), -EINVAL, "alignment not a power of two");
    cr_assert_null(out);
}

Test(runtime_bad_input, place_and_lookups_bad_arguments)
{
    open_runtime();
    struct nxr_route p;
    nxr_domain_t *d = (nxr_domain_t *)0x1;
    cr_assert_eq(nxr_runtime_route(NULL, NULL, 0, &p), -EINVAL);
    cr_assert_eq(nxr_runtime_route(rt, NULL, 2, &p), -EINVAL);
    cr_assert_eq(nxr_runtime_route(rt, NULL, 0, NULL), -EINVAL);
    cr_assert_eq(nxr_runtime_domain_of_cpu(rt, -3, &d), -EINVAL);
    cr_assert_null(d);
    cr_assert_eq(nxr_runtime_domain_of_cpu(rt, NXR_CPU_ID_MAX + 1, &d), NXR_ENODOMAIN);
    cr_assert_eq(nxr_runtime_domain_of_node(rt, -1, &d), -EINVAL);
    cr_assert_eq(nxr_runtime_domain_of_node(rt, 9999, &d), NXR_ENODOMAIN);
    cr_assert_null(d);
    cr_assert_eq(nxr_runtime_domain_here(NULL, &d), -EINVAL);
    cr_assert_eq(nxr_runtime_domain_here(rt, NULL), -EINVAL);
    nxr_ctx_t *c = (nxr_ctx_t *)0x1;
    cr_assert_eq(nxr_ctx_create_here(rt, NULL), -EINVAL);
    cr_assert_eq(nxr_ctx_create_here(NULL, &c), -EINVAL);
    cr_assert_null(c);
    cr_assert_eq(nxr_ctx_create(rt, -2, &c), NXR_ENODOMAIN, "only -1 means a routing context");
    cr_assert_str_eq(nxr_route_reason_name((enum nxr_route_reason)9), "unknown");
    cr_assert_str_eq(nxr_route_policy_name((enum nxr_route_policy)9), "unknown");
    struct nxr_runtime_opts o;
    opts_of(&o);
    o.route_policy = NXR_ROUTE_SINGLE_DOMAIN + 1;
    expect_create(&o, -EINVAL);
}

Test(runtime_bad_input, context_memory_binding_and_detail_bad_arguments)
{
    open_runtime();
    void *p = (void *)0x1;
    cr_assert_eq(nxr_ctx_alloc(NULL, 8, &p), -EINVAL);
    cr_assert_null(p);
    cr_assert_eq(nxr_ctx_alloc(ctx, 8, NULL), -EINVAL);
    cr_assert_eq(nxr_ctx_alloc(ctx, 0, &p), -EINVAL);
    cr_assert_eq(nxr_ctx_alloc(ctx, NXR_POOL_MAX_SIZE + 1, &p), -ENOMEM);
    cr_assert_null(p);
    cr_assert_eq(nxr_ctx_alloc_for(ctx, NULL, 1, 8, &p), -EINVAL);
    cr_assert_eq(nxr_ctx_alloc_for(ctx, NULL, 0, 0, &p), -EINVAL);
    cr_assert_eq(nxr_ctx_alloc_for(NULL, NULL, 0, 8, &p), -EINVAL);
    cr_assert_null(p);
    nxr_ctx_reset(NULL); /* a no-op */
    struct nxr_route pl;
    cr_assert_eq(nxr_ctx_last_route(NULL, &pl), -EINVAL);
    cr_assert_eq(nxr_ctx_last_route(ctx, NULL), -EINVAL);
    nxr_thread_binding_t *b = (nxr_thread_binding_t *)0x1;
    cr_assert_eq(nxr_ctx_bind(NULL, &b), -EINVAL);
    cr_assert_null(b);
    cr_assert_eq(nxr_ctx_bind(ctx, NULL), -EINVAL);
    cr_assert_eq(nxr_thread_binding_restore(NULL), 0, "NULL is a no-op");
    cr_assert_eq(nxr_ctx_last_error(NULL), nxr_last_error(), "0.x's name reads the thread's slot");
}

/* ---- enum names ------------------------------------------------------- */

Test(runtime_bad_input, names_of_out_of_range_enums)
{
    cr_assert_str_eq(nxr_admission_name((enum nxr_admission)9), "unknown");
    cr_assert_str_eq(nxr_placement_name((enum nxr_placement)9), "unknown");
    cr_assert_str_eq(nxr_mem_binding_name((enum nxr_mem_binding)9), "unknown");
}

/* ---- destroyed handles (checked builds) --------------------------------- */

#if defined(NXR_CHECKED) && NXR_CHECKED
static nxr_ctx_t *destroyed_ctx(void)
{
    open_runtime();
    nxr_ctx_t *c = ctx;
    nxr_ctx_destroy(c);
    ctx = NULL;
    return c;
}

Test(runtime_bad_input, destroyed_ctx_in_a_loop_aborts, .signal = SIGABRT)
{
    int calls = 0;
    nxr_parallel_for(destroyed_ctx(), 0, 10, 0, body, &calls);
}

Test(runtime_bad_input, destroyed_ctx_in_submit_aborts, .signal = SIGABRT)
{
    nxr_job_t *job;
    nxr_submit(destroyed_ctx(), 3, task, NULL, &job);
}

Test(runtime_bad_input, destroyed_ctx_in_a_kernel_aborts, .signal = SIGABRT)
{
    float v;
    nxr_sum(destroyed_ctx(), 4, xs, &v);
}

Test(runtime_bad_input, ctx_destroyed_twice_aborts, .signal = SIGABRT)
{
    nxr_ctx_destroy(destroyed_ctx());
}

Test(runtime_bad_input, destroyed_runtime_in_ctx_create_aborts, .signal = SIGABRT)
{
    open_runtime();
    nxr_ctx_destroy(ctx);
    ctx = NULL;
    nxr_runtime_t *r = rt;
    nxr_runtime_destroy(r);
    rt = NULL;
    nxr_ctx_t *c;
    nxr_ctx_create(r, 0, &c);
}

Test(runtime_bad_input, runtime_destroyed_twice_aborts, .signal = SIGABRT)
{
    open_runtime();
    nxr_ctx_destroy(ctx);
    ctx = NULL;
    nxr_runtime_t *r = rt;
    nxr_runtime_destroy(r);
    rt = NULL;
    nxr_runtime_destroy(r);
}
#endif
