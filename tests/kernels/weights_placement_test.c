/*
 * Packed weights live where they are used: each copy (runtime/nxr_weights.h)
 * is memory of its domain's arena (nxr_mem_domain names the domain, first
 * byte and last) and every one of its pages is on the domain's node
 * (nxr_mem_node, move_pages in query mode). On one node that checks the
 * binding of the one copy; the multi-node VM (numa_vm) runs it with a
 * domain per node, a copy on each.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "ref.h"
#include "runtime/nxr.h"
#include "tests/support/runtime.h"

Test(kernels_weights_placement, each_copy_is_memory_of_its_domain_on_its_node)
{
    /* The default layout: one domain per NUMA node (two in the VM). */
    struct nxr_test_runtime fx;
    NXR_TEST_RUNTIME(&fx, NULL, 0);
    nxr_runtime_t *rt = fx.rt;
    const size_t k = 300, n = 700; /* over 800 KiB: many pages */
    float *w = ref_fill(k * n, 7, -1.0f, 1.0f);
    struct nxr_weights_desc d;
    nxr_weights_desc_init(&d);
    d.k = k;
    d.n = n;
    d.w = w;
    d.ldw = n;
    nxr_weights_t *pw;
    cr_assert_eq(nxr_weights_create(rt, &d, &pw), 0); /* every domain */
    const long page = sysconf(_SC_PAGESIZE);
    size_t checked = 0;
    for (size_t i = 0; i < nxr_runtime_domain_count(rt); i++) {
        nxr_domain_t *dom = nxr_runtime_domain_at(rt, i);
        const void *data;
        size_t bytes;
        cr_assert_eq(nxr_weights_copy(pw, dom, &data, &bytes), 0);
        cr_assert_geq(bytes, k * n * sizeof(float));
        nxr_domain_t *owner;
        cr_assert_eq(nxr_mem_domain(rt, data, &owner), 0);
        cr_assert_eq(owner, dom);
        cr_assert_eq(nxr_mem_domain(rt, (const char *)data + bytes - 1, &owner), 0);
        cr_assert_eq(owner, dom);
        int node = nxr_domain_node(dom);
        if (node == NXR_NODE_NONE || nxr_domain_mem_binding(dom) != NXR_MEM_BOUND)
            continue;
        for (size_t off = 0; off < bytes; off += (size_t)page, checked++)
            cr_assert_eq(nxr_mem_node((const char *)data + off), node,
                         "page %zu of domain %d's copy is not on node %d", off / (size_t)page,
                         nxr_domain_id(dom), node);
    }
    if (checked == 0)
        fprintf(stderr, "no domain with a bound node: the page check did not run\n");
    free(w);
    nxr_weights_destroy(pw);
    nxr_runtime_destroy(rt);
}

