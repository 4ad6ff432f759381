/*
 * The public CPU-set helpers a host uses to hand nxr its CPUs: glibc masks
 * to and from bitmaps, CPU lists parsed and written. Expected sets are
 * built CPU by CPU here (CPU_SET_S, hwloc_bitmap_set), never by the helpers.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <sched.h>
#include <string.h>

#include "base/internal/sys.h"
#include "domains/nxr_domains.h"

static char err[256];

/* A bitmap holding exactly the n CPUs listed. */
static hwloc_bitmap_t set_of(const unsigned *cpus, size_t n)
{
    hwloc_bitmap_t b = hwloc_bitmap_alloc();
    for (size_t i = 0; i < n; i++)
        hwloc_bitmap_set(b, cpus[i]);
    return b;
}

Test(domains_cpuset, from_cpu_set_takes_every_cpu_of_a_large_mask)
{
    const unsigned cpus[] = {0, 3, 63, 64, 1999};
    cpu_set_t *mask = CPU_ALLOC(2000);
    size_t size = CPU_ALLOC_SIZE(2000);
    CPU_ZERO_S(size, mask);
    for (size_t i = 0; i < 5; i++)
        CPU_SET_S(cpus[i], size, mask);
    hwloc_bitmap_t got;
    cr_assert_eq(nxr_cpuset_from_cpu_set(mask, size, &got), 0);
    hwloc_bitmap_t want = set_of(cpus, 5);
    cr_expect(hwloc_bitmap_isequal(got, want));
    cr_expect_eq(hwloc_bitmap_weight(got), 5);
    hwloc_bitmap_free(got);
    hwloc_bitmap_free(want);
    CPU_FREE(mask);
}

Test(domains_cpuset, from_cpu_set_of_this_threads_affinity)
{
    cpu_set_t mask;
    CPU_ZERO(&mask);
    cr_assert_eq(sched_getaffinity(0, sizeof(mask), &mask), 0);
    hwloc_bitmap_t got;
    cr_assert_eq(nxr_cpuset_from_cpu_set(&mask, sizeof(mask), &got), 0);
    cr_expect_eq(hwloc_bitmap_weight(got), CPU_COUNT(&mask));
    for (int cpu = 0; cpu < CPU_SETSIZE; cpu++)
        cr_expect_eq(hwloc_bitmap_isset(got, (unsigned)cpu), CPU_ISSET(cpu, &mask), "cpu %d", cpu);
    hwloc_bitmap_free(got);
}

Test(domains_cpuset, from_cpu_set_bad_arguments_are_einval_and_leave_no_bitmap)
{
    cpu_set_t mask;
    CPU_ZERO(&mask);
    hwloc_bitmap_t got = (hwloc_bitmap_t)&mask; /* must be overwritten with NULL */
    cr_expect_eq(nxr_cpuset_from_cpu_set(NULL, sizeof(mask), &got), -EINVAL);
    cr_expect_null(got);
    cr_expect_eq(nxr_cpuset_from_cpu_set(&mask, 0, &got), -EINVAL);
    cr_expect_null(got);
    /* Not a whole number of words: glibc's macros would read past it. */
    cr_expect_eq(nxr_cpuset_from_cpu_set(&mask, 5, &got), -EINVAL);
    cr_expect_null(got);
    cr_expect_eq(nxr_cpuset_from_cpu_set(&mask, sizeof(mask), NULL), -EINVAL);
}

Test(domains_cpuset, from_cpu_set_out_of_memory_is_enomem)
{
    cpu_set_t mask;
    CPU_ZERO(&mask);
    CPU_SET(1, &mask);
    hwloc_bitmap_t got;
    nxr__fault_arm(NXR_FAULT_ALLOC, 1);
    int rc = nxr_cpuset_from_cpu_set(&mask, sizeof(mask), &got);
    nxr__fault_arm(0, 0);
    cr_expect_eq(rc, -ENOMEM);
    cr_expect_null(got);
}

Test(domains_cpuset, to_cpu_set_sets_exactly_the_bitmaps_cpus)
{
    const unsigned cpus[] = {1, 5, 64, 1023};
    hwloc_bitmap_t b = set_of(cpus, 4);
    cpu_set_t mask;
    memset(&mask, 0xff, sizeof(mask)); /* stale bits must be cleared */
    cr_assert_eq(nxr_cpuset_to_cpu_set(b, &mask, sizeof(mask)), 0);
    cr_expect_eq(CPU_COUNT(&mask), 4);
    for (size_t i = 0; i < 4; i++)
        cr_expect(CPU_ISSET(cpus[i], &mask), "cpu %u", cpus[i]);
    hwloc_bitmap_free(b);
}

Test(domains_cpuset, to_cpu_set_of_the_empty_set_is_an_empty_mask)
{
    hwloc_bitmap_t b = hwloc_bitmap_alloc();
    cpu_set_t mask;
    memset(&mask, 0xff, sizeof(mask));
    cr_assert_eq(nxr_cpuset_to_cpu_set(b, &mask, sizeof(mask)), 0);
    cr_expect_eq(CPU_COUNT(&mask), 0);
    hwloc_bitmap_free(b);
}

/* A CPU beyond the mask, or an infinite set, is -ERANGE and the mask is
 * exactly as it was. */
Test(domains_cpuset, to_cpu_set_that_does_not_fit_is_erange_and_changes_nothing)
{
    const unsigned cpus[] = {2, 1024};
    hwloc_bitmap_t big = set_of(cpus, 2);
    cpu_set_t mask, before;
    CPU_ZERO(&mask);
    CPU_SET(7, &mask);
    before = mask;
    cr_expect_eq(nxr_cpuset_to_cpu_set(big, &mask, sizeof(mask)), -ERANGE);
    cr_expect_eq(memcmp(&mask, &before, sizeof(mask)), 0);

    hwloc_bitmap_t all = hwloc_bitmap_alloc_full();
    cr_expect_eq(nxr_cpuset_to_cpu_set(all, &mask, sizeof(mask)), -ERANGE);
    cr_expect_eq(memcmp(&mask, &before, sizeof(mask)), 0);

    /* CPU 1024 fits a mask of 1025 CPUs. */
    cpu_set_t *wide = CPU_ALLOC(1025);
    size_t size = CPU_ALLOC_SIZE(1025);
    cr_expect_eq(nxr_cpuset_to_cpu_set(big, wide, size), 0);
    cr_expect(CPU_ISSET_S(1024, size, wide));
    cr_expect_eq(CPU_COUNT_S(size, wide), 2);
    CPU_FREE(wide);
    hwloc_bitmap_free(big);
    hwloc_bitmap_free(all);
}

Test(domains_cpuset, to_cpu_set_bad_arguments_are_einval)
{
    hwloc_bitmap_t b = hwloc_bitmap_alloc();
    cpu_set_t mask;
    cr_expect_eq(nxr_cpuset_to_cpu_set(NULL, &mask, sizeof(mask)), -EINVAL);
    cr_expect_eq(nxr_cpuset_to_cpu_set(b, NULL, sizeof(mask)), -EINVAL);
    cr_expect_eq(nxr_cpuset_to_cpu_set(b, &mask, 0), -EINVAL);
    cr_expect_eq(nxr_cpuset_to_cpu_set(b, &mask, 12), -EINVAL);
    hwloc_bitmap_free(b);
}

Test(domains_cpuset, parse_ranges_blanks_and_a_trailing_newline)
{
    const unsigned cpus[] = {0, 1, 2, 3, 8, 10, 11, 65535};
    hwloc_bitmap_t want = set_of(cpus, 8);
    hwloc_bitmap_t got;
    cr_assert_eq(nxr_cpuset_parse(" 0-3, 8 ,10-11,65535\n", &got), 0, "%s", nxr_last_error());
    cr_expect(hwloc_bitmap_isequal(got, want));
    hwloc_bitmap_free(got);
    hwloc_bitmap_free(want);
}

Test(domains_cpuset, parse_empty_list_is_the_empty_set)
{
    const char *empties[] = {"", "  ", "\n"};
    for (size_t i = 0; i < 3; i++) {
        hwloc_bitmap_t got;
        cr_assert_eq(nxr_cpuset_parse(empties[i], &got), 0, "'%s'", empties[i]);
        cr_expect(hwloc_bitmap_iszero(got));
        hwloc_bitmap_free(got);
    }
}

Test(domains_cpuset, parse_refuses_malformed_lists_with_esyntax)
{
    const char *bad[] = {"a",  "1,",  ",1",    "1,,2",    "3-1", "1-",
                         "-1", "1 2", "65536", "0-3\n\n", "1;2"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        hwloc_bitmap_t got = (hwloc_bitmap_t)err; /* not NULL: the call must clear it */
        cr_expect_eq(nxr_cpuset_parse(bad[i], &got), NXR_ESYNTAX, "'%s'", bad[i]);
        cr_expect_null(got, "'%s'", bad[i]);
        cr_expect_not_null(strstr(nxr_last_error(), "CPU list"), "'%s': message '%s'", bad[i],
                           nxr_last_error());
    }
}

Test(domains_cpuset, parse_bad_arguments_and_out_of_memory)
{
    hwloc_bitmap_t got;
    cr_expect_eq(nxr_cpuset_parse(NULL, &got), -EINVAL);
    cr_expect_null(got);
    cr_expect_eq(nxr_cpuset_parse("0", NULL), -EINVAL);
    nxr__fault_arm(NXR_FAULT_ALLOC, 1);
    int rc = nxr_cpuset_parse("0-1", &got);
    nxr__fault_arm(0, 0);
    cr_expect_eq(rc, -ENOMEM);
    cr_expect_null(got);
}

Test(domains_cpuset, format_writes_the_kernels_list_form)
{
    const unsigned cpus[] = {0, 1, 2, 3, 8, 10, 11};
    hwloc_bitmap_t b = set_of(cpus, 7);
    char buf[32];
    size_t len = 0;
    cr_assert_eq(nxr_cpuset_format(b, buf, sizeof(buf), &len), 0);
    cr_expect_str_eq(buf, "0-3,8,10-11");
    cr_expect_eq(len, strlen("0-3,8,10-11"));
    hwloc_bitmap_free(b);

    hwloc_bitmap_t empty = hwloc_bitmap_alloc();
    memset(buf, 'x', sizeof(buf));
    cr_assert_eq(nxr_cpuset_format(empty, buf, sizeof(buf), &len), 0);
    cr_expect_str_eq(buf, "");
    cr_expect_eq(len, 0);
    hwloc_bitmap_free(empty);
}

Test(domains_cpuset, format_too_small_is_enospc_with_the_length_and_buf_untouched)
{
    const unsigned cpus[] = {0, 1, 2, 3, 8};
    hwloc_bitmap_t b = set_of(cpus, 5); /* "0-3,8": 5 characters */
    char buf[8];
    memcpy(buf, "keepme!", 8);
    size_t len = 0;
    cr_expect_eq(nxr_cpuset_format(b, buf, 5, &len), -ENOSPC);
    cr_expect_eq(len, 5);
    cr_expect_str_eq(buf, "keepme!");
    cr_expect_eq(nxr_cpuset_format(b, buf, 6, NULL), 0);
    cr_expect_str_eq(buf, "0-3,8");
    hwloc_bitmap_free(b);
}

Test(domains_cpuset, format_bad_arguments_are_einval)
{
    hwloc_bitmap_t b = hwloc_bitmap_alloc();
    hwloc_bitmap_t all = hwloc_bitmap_alloc_full();
    char buf[8];
    cr_expect_eq(nxr_cpuset_format(NULL, buf, sizeof(buf), NULL), -EINVAL);
    cr_expect_eq(nxr_cpuset_format(b, NULL, sizeof(buf), NULL), -EINVAL);
    cr_expect_eq(nxr_cpuset_format(b, buf, 0, NULL), -EINVAL);
    cr_expect_eq(nxr_cpuset_format(all, buf, sizeof(buf), NULL), -EINVAL);
    hwloc_bitmap_free(b);
    hwloc_bitmap_free(all);
}

/* What a host attaching a pool does: its threads' mask to nxr and back. */
Test(domains_cpuset, list_mask_and_bitmap_round_trip)
{
    hwloc_bitmap_t parsed, back;
    cr_assert_eq(nxr_cpuset_parse("0,2,4-6,100", &parsed), 0, "%s", nxr_last_error());
    cpu_set_t mask;
    cr_assert_eq(nxr_cpuset_to_cpu_set(parsed, &mask, sizeof(mask)), 0);
    cr_expect_eq(CPU_COUNT(&mask), 6);
    cr_expect(CPU_ISSET(100, &mask));
    cr_assert_eq(nxr_cpuset_from_cpu_set(&mask, sizeof(mask), &back), 0);
    char buf[32];
    cr_assert_eq(nxr_cpuset_format(back, buf, sizeof(buf), NULL), 0);
    cr_expect_str_eq(buf, "0,2,4-6,100");
    hwloc_bitmap_free(parsed);
    hwloc_bitmap_free(back);
}

/* The forged peer-entry lists of issue 30 (ids far past NXR_CPU_ID_MAX):
 * refused while the digits are read, before any bitmap grows. The peer
 * registry reads entries with this same parser. */
Test(domains_cpuset, parse_refuses_ids_past_the_bound_before_building)
{
    const char *bad[] = {"4294967294", "0-2000000000", "12345678901234567890", "0-65536",
                         "99999999999999999999999999999999"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        hwloc_bitmap_t got = NULL;
        cr_expect_eq(nxr_cpuset_parse(bad[i], &got), NXR_ESYNTAX, "'%s'", bad[i]);
        cr_expect_null(got);
        cr_expect_neq(strstr(nxr_last_error(), "out of range"), NULL, "'%s': '%s'", bad[i],
                      nxr_last_error());
    }
}
