/*
 * nxr's jemalloc is private: linking nxr does not change what the host's
 * malloc is, and no jemalloc entry point of nxr's is visible to the host by
 * its usual name. The private copy still initialises and works.
 *
 * Built twice: as a plain host (malloc must be glibc's) and as a host that
 * links Debian's libjemalloc.so itself (HOST_MALLOC_FROM="libjemalloc.so":
 * malloc must stay that one, and both jemallocs work side by side).
 */
#include <criterion/criterion.h>
#include <dlfcn.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc/internal/je.h"
#include "runtime/nxr.h"

#if defined(__SANITIZE_ADDRESS__)
#define ASAN_BUILD 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define ASAN_BUILD 1
#endif
#endif
#ifndef ASAN_BUILD
#define ASAN_BUILD 0
#endif
#ifndef HOST_MALLOC_FROM
#define HOST_MALLOC_FROM "libc.so"
#endif

static const char *object_of(void *addr)
{
    Dl_info info;
    if (addr == NULL || dladdr(addr, &info) == 0 || info.dli_fname == NULL)
        return "(none)";
    return info.dli_fname;
}

/* Under ASan the host's malloc is ASan's interceptor, linked into the test
 * binary; otherwise it is HOST_MALLOC_FROM's. Never nxr's jemalloc. */
static void assert_host_symbol(const char *name)
{
    void *sym = dlsym(RTLD_DEFAULT, name);
    cr_assert_not_null(sym);
#if ASAN_BUILD
    char interceptor[64];
    snprintf(interceptor, sizeof(interceptor), "__interceptor_%s", name);
    cr_assert_eq(sym, dlsym(RTLD_DEFAULT, interceptor), "%s is not ASan's", name);
#else
    const char *from = object_of(sym);
    cr_assert_not_null(strstr(from, HOST_MALLOC_FROM), "%s resolves to %s", name, from);
#endif
}

Test(alloc_jemalloc, host_malloc_stays_the_hosts)
{
    assert_host_symbol("malloc");
    assert_host_symbol("free");
    assert_host_symbol("posix_memalign");
    void *p = malloc(100);
    cr_assert_geq(malloc_usable_size(p), 100);
    free(p);
}

Test(alloc_jemalloc, no_jemalloc_symbol_is_visible_by_its_usual_name)
{
    if (strcmp(HOST_MALLOC_FROM, "libc.so") != 0)
        cr_skip_test("the host links its own jemalloc, whose symbols are visible");
    const char *names[] = {"mallocx",   "dallocx",    "mallctl",
                           "je_malloc", "je_mallocx", "malloc_conf",
                           "nallocx",   "sdallocx",   "je_arena_choose_hard"};
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
        cr_assert_null(dlsym(RTLD_DEFAULT, names[i]), "%s is visible (from %s)", names[i],
                       object_of(dlsym(RTLD_DEFAULT, names[i])));
}

Test(alloc_jemalloc, the_private_copy_initialises_and_allocates)
{
    const char *version = NULL;
    size_t sz = sizeof(version);
    cr_assert_eq(nxr_je_mallctl("version", &version, &sz, NULL, 0), 0);
    cr_assert_not_null(version);
    cr_assert_eq(strncmp(version, "5.", 2), 0, "version %s", version);
    nxr_runtime_t *rt;
    cr_assert_eq(nxr_runtime_create(NULL, &rt), 0);
    void *p;
    cr_assert_eq(nxr_domain_malloc(nxr_runtime_domain_at(rt, 0), 1000, 0, &p), 0);
    memset(p, 1, 1000);
    cr_assert_geq(nxr_je_sallocx(p, 0), 1000);
    nxr_domain_free(p);
    nxr_runtime_destroy(rt);
}
