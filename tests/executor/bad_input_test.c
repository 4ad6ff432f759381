/*
 * The bad-input rows of executor/nxr_executor.h: the table's rule, and where its
 * other rows live, are in tests/support/bad_input.h.
 */
#include "tests/support/bad_input.h"

TestSuite(executor_bad_input, .fini = teardown, .timeout = 60);

/* ---- executor ----------------------------------------------------------- */

Test(executor_bad_input, parallel_for_null_ctx_or_fn_or_reversed_range_is_einval)
{
    open_runtime();
    int calls = 0;
    cr_assert_eq(nxr_parallel_for(NULL, 0, 10, 0, body, &calls), -EINVAL);
    cr_assert_eq(nxr_parallel_for(ctx, 0, 10, 0, NULL, &calls), -EINVAL);
    cr_assert_eq(nxr_parallel_for(ctx, 10, 0, 0, body, &calls), -EINVAL);
    cr_assert_eq(nxr_parallel_for_opts(NULL, 0, 10, NULL, body, &calls), -EINVAL);
    cr_assert_eq(calls, 0);
}

Test(executor_bad_input, parallel_for_empty_range_calls_nothing)
{
    open_runtime();
    int calls = 0;
    cr_assert_eq(nxr_parallel_for(ctx, 5, 5, 0, body, &calls), 0);
    cr_assert_eq(nxr_parallel_for(ctx, SIZE_MAX, SIZE_MAX, 1, body, &calls), 0);
    cr_assert_eq(calls, 0);
}

static void map_count(void *arg, size_t b, size_t e, void *partial)
{
    (void)arg;
    *(size_t *)partial += e - b;
}

static void combine_sum(void *arg, void *result, const void *partial)
{
    (void)arg;
    *(size_t *)result += *(const size_t *)partial;
}

Test(executor_bad_input, parallel_reduce_null_arguments_or_zero_size_are_einval)
{
    open_runtime();
    size_t zero = 0, result = 0;
    cr_assert_eq(nxr_parallel_reduce(NULL, 0, 9, 1, sizeof(size_t), &zero, map_count, combine_sum,
                                     NULL, &result),
                 -EINVAL);
    cr_assert_eq(
        nxr_parallel_reduce(ctx, 0, 9, 1, sizeof(size_t), &zero, NULL, combine_sum, NULL, &result),
        -EINVAL);
    cr_assert_eq(
        nxr_parallel_reduce(ctx, 0, 9, 1, sizeof(size_t), &zero, map_count, NULL, NULL, &result),
        -EINVAL);
    cr_assert_eq(nxr_parallel_reduce(ctx, 0, 9, 1, sizeof(size_t), NULL, map_count, combine_sum,
                                     NULL, &result),
                 -EINVAL);
    cr_assert_eq(nxr_parallel_reduce(ctx, 0, 9, 1, sizeof(size_t), &zero, map_count, combine_sum,
                                     NULL, NULL),
                 -EINVAL);
    cr_assert_eq(nxr_parallel_reduce(ctx, 0, 9, 1, 0, &zero, map_count, combine_sum, NULL, &result),
                 -EINVAL, "zero element size");
    cr_assert_eq(nxr_parallel_reduce(ctx, 9, 0, 1, sizeof(size_t), &zero, map_count, combine_sum,
                                     NULL, &result),
                 -EINVAL, "reversed range");
}

Test(executor_bad_input, run_null_ctx_or_fn_or_bad_mode_is_einval)
{
    open_runtime();
    cr_assert_eq(nxr_run(NULL, NXR_MODE_OUTER, 3, task, NULL), -EINVAL);
    cr_assert_eq(nxr_run(ctx, NXR_MODE_OUTER, 3, NULL, NULL), -EINVAL);
    cr_assert_eq(nxr_run(ctx, (enum nxr_mode)7, 3, task, NULL), -EINVAL);
    cr_assert_eq(nxr_run(ctx, (enum nxr_mode) - 1, 3, task, NULL), -EINVAL);
}

Test(executor_bad_input, run_and_submit_zero_tasks_succeed)
{
    open_runtime();
    cr_assert_eq(nxr_run(ctx, NXR_MODE_OUTER, 0, task, NULL), 0);
    nxr_job_t *job;
    cr_assert_eq(nxr_submit(ctx, 0, task, NULL, &job), 0);
    cr_assert_eq(nxr_job_wait(job), 0);
}

Test(executor_bad_input, submit_null_ctx_or_fn_is_einval)
{
    open_runtime();
    nxr_job_t *job = (nxr_job_t *)0x1;
    cr_assert_eq(nxr_submit(NULL, 3, task, NULL, &job), -EINVAL);
    cr_assert_null(job);
    job = (nxr_job_t *)0x1;
    cr_assert_eq(nxr_submit(ctx, 3, NULL, NULL, &job), -EINVAL);
    cr_assert_null(job);
}

Test(executor_bad_input, job_wait_null_is_einval_and_detach_null_a_no_op)
{
    cr_assert_eq(nxr_job_wait(NULL), -EINVAL);
    nxr_job_detach(NULL);
}
