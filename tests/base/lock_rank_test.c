/*
 * The lock-rank table (base/internal/lock_rank.h): locks taken in rank order
 * pass, an inversion or a second lock of one rank aborts naming both, and a
 * release forgets the hold. This file is compiled checked (BUILD), so the
 * inline wrappers check here whatever the library's build.
 */
#include <criterion/criterion.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>

#include "base/internal/lock_rank.h"
#include "tests/support/procfs.h"

#if !defined(NXR_CHECKED) || !NXR_CHECKED
#error "this test is built with -DNXR_CHECKED=1 (see tests/base/BUILD.bazel)"
#endif

static int in_child(void (*fn)(void), char *text, size_t size)
{
    int status = nxr_test_in_child(fn, text, size);
    cr_assert_neq(status, -1, "fork or pipe failed");
    return status;
}

static pthread_mutex_t outer = PTHREAD_MUTEX_INITIALIZER, inner = PTHREAD_MUTEX_INITIALIZER;

Test(base_lock_rank, locks_in_rank_order_are_held_and_released)
{
    cr_assert_eq(nxr__lock_rank_held(), 0u);
    nxr__lock(&outer, NXR__RANK_ADMISSION);
    nxr__lock(&inner, NXR__RANK_ARBITER);
    cr_assert_eq(nxr__lock_rank_held(), 2u, "a checked lock records its rank");
    /* Released out of order: each release forgets its own rank. */
    nxr__unlock(&outer, NXR__RANK_ADMISSION);
    cr_assert_eq(nxr__lock_rank_held(), 1u);
    nxr__unlock(&inner, NXR__RANK_ARBITER);
    cr_assert_eq(nxr__lock_rank_held(), 0u);
    /* And the lower rank may be taken again afterwards. */
    nxr__lock(&outer, NXR__RANK_ADMISSION);
    nxr__unlock(&outer, NXR__RANK_ADMISSION);
    cr_assert_eq(nxr__lock_rank_held(), 0u);
}

static void take_inverted(void)
{
    nxr__lock(&inner, NXR__RANK_ARBITER);
    nxr__lock(&outer, NXR__RANK_ADMISSION); /* aborts before waiting */
}

Test(base_lock_rank, an_inversion_aborts_naming_both_locks)
{
    char text[512];
    int status = in_child(take_inverted, text, sizeof text);
    cr_assert(WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT, "status %#x; printed: %s", status,
              text);
    cr_assert_not_null(strstr(text, "lock order violated"), "%s", text);
    cr_assert_not_null(strstr(text, nxr__lock_rank_name(NXR__RANK_ADMISSION)), "%s", text);
    cr_assert_not_null(strstr(text, nxr__lock_rank_name(NXR__RANK_ARBITER)), "%s", text);
}

static void take_same_rank_twice(void)
{
    nxr__lock(&outer, NXR__RANK_ADMISSION);
    nxr__lock(&inner, NXR__RANK_ADMISSION);
}

Test(base_lock_rank, two_locks_of_one_rank_are_never_held_together)
{
    char text[512];
    int status = in_child(take_same_rank_twice, text, sizeof text);
    cr_assert(WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT, "status %#x; printed: %s", status,
              text);
    cr_assert_not_null(strstr(text, nxr__lock_rank_name(NXR__RANK_ADMISSION)), "%s", text);
}

static void release_unheld(void)
{
    nxr__lock_rank_release(NXR__RANK_POOL);
}

Test(base_lock_rank, releasing_a_rank_not_held_aborts)
{
    char text[512];
    int status = in_child(release_unheld, text, sizeof text);
    cr_assert(WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT, "status %#x", status);
    cr_assert_not_null(strstr(text, "does not hold"), "%s", text);
}

static void wait_holding(void)
{
    nxr__lock(&outer, NXR__RANK_COUNT_GATE);
    nxr__lock_rank_assert_none("waiting for a permit");
}

Test(base_lock_rank, waiting_for_a_permit_with_a_lock_held_aborts)
{
    char text[512];
    int status = in_child(wait_holding, text, sizeof text);
    cr_assert(WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT, "status %#x", status);
    cr_assert_not_null(strstr(text, nxr__lock_rank_name(NXR__RANK_COUNT_GATE)), "%s", text);
    cr_assert_not_null(strstr(text, "waiting for a permit"), "%s", text);
}

Test(base_lock_rank, every_rank_has_a_name)
{
    for (int r = 1; r < NXR__RANK_END; r++)
        cr_assert_str_neq(nxr__lock_rank_name((enum nxr__lock_rank)r), "?", "rank %d", r);
    cr_assert_str_eq(nxr__lock_rank_name(NXR__RANK_END), "?");
}
