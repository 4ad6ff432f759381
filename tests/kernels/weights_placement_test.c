/*
 * Packed weights live where they are used: each copy (runtime/nxr_weights.h)
 * is memory of its domain's arena (nxr_mem_domain names the domain, first
 * byte and last) and every one of its pages is on the domain's node
 * (nxr_mem_pages_on_node, move_pages in query mode). On one node that checks the
 * binding of the one copy; the multi-node VM (numa_vm) runs it with a
 * domain per node, a copy on each. Every weight format (f32, bf16, 8-bit
 * blocks) is checked alike.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ref.h"
#include "runtime/nxr.h"
#include "tests/support/runtime.h"

/* One format's copies: each memory of its domain, every page on its node.
 * Returns the pages checked. */
static size_t check_copies(nxr_runtime_t *rt, const float *w, size_t k, size_t n,
                           enum nxr_weights_format format, size_t min_bytes)
{
    struct nxr_weights_desc d;
    nxr_weights_desc_init(&d);
    d.k = k;
    d.n = n;
    d.w = w;
    d.ldw = n;
    nxr_weights_t *pw;
    cr_assert_eq(nxr_weights_create_format(rt, &d, format, &pw), 0); /* every domain */
    const long page = sysconf(_SC_PAGESIZE);
    size_t checked = 0;
    for (size_t i = 0; i < nxr_runtime_domain_count(rt); i++) {
        nxr_domain_t *dom = nxr_runtime_domain_at(rt, i);
        const void *data;
        size_t bytes;
        cr_assert_eq(nxr_weights_copy(pw, dom, &data, &bytes), 0);
        cr_assert_geq(bytes, min_bytes, "format %d", format);
        nxr_domain_t *owner;
        cr_assert_eq(nxr_mem_domain(rt, data, &owner), 0);
        cr_assert_eq(owner, dom);
        cr_assert_eq(nxr_mem_domain(rt, (const char *)data + bytes - 1, &owner), 0);
        cr_assert_eq(owner, dom);
        int node = nxr_domain_node(dom);
        if (node == NXR_NODE_NONE || nxr_domain_mem_binding(dom) != NXR_MEM_BOUND)
            continue;
        size_t pages, on;
        cr_assert_eq(nxr_mem_pages_on_node(data, bytes, node, &pages, &on), 0, "%s",
                     nxr_last_error());
        cr_assert_eq(pages, (bytes + (size_t)page - 1) / (size_t)page, "a copy is page-aligned");
        cr_assert_eq(on, pages, "format %d: %zu of domain %d's %zu pages on node %d", format, on,
                     nxr_domain_id(dom), pages, node);
        checked += pages;
    }
    nxr_weights_destroy(pw);
    return checked;
}

Test(kernels_weights_placement, each_copy_is_memory_of_its_domain_on_its_node)
{
    /* The default layout: one domain per NUMA node (two in the VM). */
    struct nxr_test_runtime fx;
    NXR_TEST_RUNTIME(&fx, NULL, 0);
    const size_t k = 300, n = 700; /* over 800 KiB: many pages */
    float *w = ref_fill(k * n, 7, -1.0f, 1.0f);
    size_t checked = check_copies(fx.rt, w, k, n, NXR_WEIGHTS_F32, k * n * sizeof(float));
    /* bf16 and 8-bit blocks: the same allocation, binding and page check. */
    checked += check_copies(fx.rt, w, k, n, NXR_WEIGHTS_BF16, k * n * 2);
    checked += check_copies(fx.rt, w, k, n, NXR_WEIGHTS_Q8_BLOCK32, k * n + k * n / 32 * 4);
    if (checked == 0)
        fprintf(stderr, "no domain with a bound node: the page check did not run\n");
    free(w);
    nxr_runtime_destroy(fx.rt);
}

/* Huge pages (runtime/nxr_weights.h): a copy of 2 MiB or more is advised
 * when the system's THP mode allows it, read here from sysfs on its own; the
 * page check holds for it as for any copy; and what nxr reports on huge
 * pages (PAGEMAP_SCAN) agrees with the kernel's other account of it, the
 * AnonHugePages of the mapping in /proc/self/smaps. Whether the kernel had a
 * huge page free is its business: none is said, not failed. */

/* The THP mode's bracketed word, or "" when sysfs does not say. */
static void thp_mode(char *mode, size_t size)
{
    mode[0] = '\0';
    FILE *f = fopen("/sys/kernel/mm/transparent_hugepage/enabled", "r");
    char line[128];
    if (f == NULL)
        return;
    if (fgets(line, sizeof(line), f) != NULL) {
        char *open = strchr(line, '['), *close = open != NULL ? strchr(open, ']') : NULL;
        if (close != NULL)
            snprintf(mode, size, "%.*s", (int)(close - open - 1), open + 1);
    }
    fclose(f);
}

static bool thp_can_advise(void)
{
    char mode[32];
    thp_mode(mode, sizeof(mode));
    return strcmp(mode, "madvise") == 0 || strcmp(mode, "always") == 0;
}

/* The kernel's account of the mapping that holds p, from /proc/self/smaps:
 * its AnonHugePages in bytes (-1: no mapping holds p) and whether its
 * VmFlags carry "hg" (advised MADV_HUGEPAGE). */
struct smaps_view {
    long long anon_huge;
    bool advised;
};

static struct smaps_view smaps_of(const void *p)
{
    FILE *f = fopen("/proc/self/smaps", "r");
    cr_assert_not_null(f);
    char line[512];
    bool inside = false;
    struct smaps_view v = {.anon_huge = -1};
    while (fgets(line, sizeof(line), f) != NULL) {
        unsigned long lo, hi;
        long long kb;
        char perms[8];
        /* A mapping's first line: "lo-hi perms offset dev inode [path]". */
        if (sscanf(line, "%lx-%lx %7s ", &lo, &hi, perms) == 3) {
            if (inside)
                break; /* past the mapping that holds p */
            inside = (uintptr_t)p >= lo && (uintptr_t)p < hi;
            continue;
        }
        if (!inside)
            continue;
        if (sscanf(line, "AnonHugePages: %lld kB", &kb) == 1)
            v.anon_huge = kb * 1024;
        if (strncmp(line, "VmFlags:", 8) == 0)
            v.advised = strstr(line, " hg") != NULL;
    }
    fclose(f);
    return v;
}

static nxr_weights_t *pack_square(nxr_runtime_t *rt, size_t k, float **w)
{
    *w = ref_fill(k * k, 11, -1.0f, 1.0f);
    struct nxr_weights_desc d;
    nxr_weights_desc_init(&d);
    d.k = k;
    d.n = k;
    d.w = *w;
    d.ldw = k;
    nxr_weights_t *pw;
    cr_assert_eq(nxr_weights_create(rt, &d, &pw), 0);
    return pw;
}

Test(kernels_weights_placement, a_copy_of_a_huge_page_or_more_is_advised_and_stays_on_its_node)
{
    struct nxr_test_runtime fx;
    NXR_TEST_RUNTIME(&fx, NULL, 0);
    float *w;
    nxr_weights_t *pw = pack_square(fx.rt, 1024, &w); /* 4 MiB */
    const long page = sysconf(_SC_PAGESIZE);
    for (size_t i = 0; i < nxr_runtime_domain_count(fx.rt); i++) {
        nxr_domain_t *dom = nxr_runtime_domain_at(fx.rt, i);
        const void *data;
        size_t bytes, huge;
        bool advised;
        cr_assert_eq(nxr_weights_copy(pw, dom, &data, &bytes), 0);
        int rc = nxr_weights_huge_pages(pw, dom, &advised, &huge);
        cr_assert(rc == 0 || rc == -ENOSYS, "nxr_weights_huge_pages: %s", nxr_strerror(rc));
        cr_expect_eq(advised, thp_can_advise(), "advised %d with THP mode allowing it %d",
                     advised, thp_can_advise());
        cr_expect_eq((uintptr_t)data % (2u << 20), 0, "an advised copy starts on a huge page");
        if (rc == -ENOSYS)
            fprintf(stderr, "this kernel cannot say which pages are huge (PAGEMAP_SCAN)\n");
        cr_expect_leq(huge, bytes);
        struct smaps_view mapping = smaps_of(data);
        cr_expect_eq(mapping.advised, advised, "nxr says advised %d, the mapping's VmFlags %d",
                     advised, mapping.advised);
        if (huge > 0) {
            cr_expect_geq(mapping.anon_huge, (long long)huge,
                          "pagemap says %zu bytes are huge, smaps %lld for the mapping", huge,
                          mapping.anon_huge);
        } else if (rc == 0 && advised) {
            fprintf(stderr, "the kernel backed none of domain %d's copy with huge pages\n",
                    nxr_domain_id(dom));
        }
        int node = nxr_domain_node(dom);
        if (node == NXR_NODE_NONE || nxr_domain_mem_binding(dom) != NXR_MEM_BOUND)
            continue;
        size_t pages, on;
        cr_assert_eq(nxr_mem_pages_on_node(data, bytes, node, &pages, &on), 0, "%s",
                     nxr_last_error());
        cr_assert_eq(pages, (bytes + (size_t)page - 1) / (size_t)page, "a copy is page-aligned");
        cr_assert_eq(on, pages, "%zu of domain %d's %zu pages on node %d", on, nxr_domain_id(dom),
                     pages, node);
    }
    nxr_weights_destroy(pw);
    free(w);
    nxr_runtime_destroy(fx.rt);
}

Test(kernels_weights_placement, a_copy_under_a_huge_page_is_not_advised)
{
    struct nxr_test_runtime fx;
    NXR_TEST_RUNTIME(&fx, NULL, 0);
    float *w;
    nxr_weights_t *pw = pack_square(fx.rt, 128, &w); /* 64 KiB */
    nxr_domain_t *dom = nxr_runtime_domain_at(fx.rt, 0);
    size_t huge;
    bool advised = true;
    int rc = nxr_weights_huge_pages(pw, dom, &advised, &huge);
    cr_assert(rc == 0 || rc == -ENOSYS);
    cr_expect(!advised);
    nxr_weights_destroy(pw);
    free(w);
    nxr_runtime_destroy(fx.rt);
}

Test(kernels_weights_placement, NXR_HUGEPAGES_off_advises_nothing)
{
    struct nxr_test_runtime fx;
    nxr_test_runtime_opts(&fx, NULL, 0);
    fx.opts.ignore_env = false; /* this test is about the environment */
    setenv("NXR_HUGEPAGES", "off", 1);
    NXR_TEST_RUNTIME_OPEN(&fx);
    float *w;
    nxr_weights_t *pw = pack_square(fx.rt, 1024, &w);
    nxr_domain_t *dom = nxr_runtime_domain_at(fx.rt, 0);
    size_t huge;
    bool advised = true;
    int rc = nxr_weights_huge_pages(pw, dom, &advised, &huge);
    cr_assert(rc == 0 || rc == -ENOSYS);
    cr_expect(!advised);
    const void *data;
    size_t bytes;
    cr_assert_eq(nxr_weights_copy(pw, dom, &data, &bytes), 0);
    cr_expect(!smaps_of(data).advised, "the mapping is advised for huge pages");
    char mode[32];
    thp_mode(mode, sizeof(mode));
    if (rc == 0 && strcmp(mode, "madvise") == 0)
        cr_expect_eq(huge, 0, "not advised in madvise mode, yet %zu bytes on huge pages", huge);
    char *text;
    cr_assert_eq(nxr_runtime_describe(fx.rt, NXR_DESCRIBE_TEXT, &text), 0);
    cr_expect_neq(strstr(text, "huge pages: packed weights off"), NULL, "%s", text);
    free(text);
    nxr_weights_destroy(pw);
    free(w);
    nxr_runtime_destroy(fx.rt);
    unsetenv("NXR_HUGEPAGES");
}

Test(kernels_weights_placement, a_bad_NXR_HUGEPAGES_is_a_syntax_error_naming_it)
{
    struct nxr_test_runtime fx;
    nxr_test_runtime_opts(&fx, NULL, 0);
    fx.opts.ignore_env = false;
    setenv("NXR_HUGEPAGES", "yes please", 1);
    cr_assert_eq(nxr_test_runtime_open(&fx), NXR_ESYNTAX);
    cr_expect_neq(strstr(fx.err, "NXR_HUGEPAGES"), NULL, "%s", fx.err);
    cr_expect_null(fx.rt);
    unsetenv("NXR_HUGEPAGES");
}

Test(kernels_weights_placement, huge_page_queries_check_their_arguments)
{
    struct nxr_test_runtime fx;
    NXR_TEST_RUNTIME(&fx, NULL, 0);
    float *w;
    nxr_weights_t *pw = pack_square(fx.rt, 16, &w);
    nxr_domain_t *dom = nxr_runtime_domain_at(fx.rt, 0);
    size_t huge = 7;
    bool advised = true;
    cr_expect_eq(nxr_weights_huge_pages(NULL, dom, &advised, &huge), -EINVAL);
    cr_expect(!advised);
    cr_expect_eq(huge, 0);
    cr_expect_eq(nxr_weights_huge_pages(pw, NULL, &advised, &huge), -EINVAL);
    cr_expect_eq(nxr_weights_huge_pages(pw, dom, NULL, &huge), -EINVAL);
    cr_expect_eq(nxr_weights_huge_pages(pw, dom, &advised, NULL), -EINVAL);
    nxr_weights_destroy(pw);
    free(w);
    nxr_runtime_destroy(fx.rt);
}
