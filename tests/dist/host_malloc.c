/*
 * A host linking nxr (libnxr.a or libnxr.so, see exports_test.sh) keeps its
 * own malloc, and sees none of nxr's internals: `malloc` resolves to
 * HOST_MALLOC_FROM (glibc's libc.so by default; the test also builds a host
 * that links Debian's libjemalloc.so itself), and the names nxr uses inside
 * (its private jemalloc's entry points, je_* internals, nxr__* functions)
 * are not visible to dlsym -- the static host is linked with -rdynamic, so
 * any global symbol it got from libnxr.a would be. nxr's own jemalloc copy
 * still works: a domain allocation succeeds and is usable.
 * Prints "host_malloc: ok" or FAILED lines.
 */
#define _GNU_SOURCE /* dladdr, RTLD_DEFAULT */
#include <nxr/nxr.h>

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef HOST_MALLOC_FROM
#define HOST_MALLOC_FROM "libc.so"
#endif

static int failures;

static const char *object_of(void *addr)
{
    Dl_info info;
    if (addr == NULL || dladdr(addr, &info) == 0 || info.dli_fname == NULL)
        return "(none)";
    return info.dli_fname;
}

int main(void)
{
    const char *host[] = {"malloc", "free", "calloc", "realloc", "posix_memalign"};
    for (size_t i = 0; i < sizeof(host) / sizeof(host[0]); i++) {
        const char *from = object_of(dlsym(RTLD_DEFAULT, host[i]));
        if (strstr(from, HOST_MALLOC_FROM) == NULL) {
            fprintf(stderr, "host_malloc: FAILED: %s resolves to %s, not %s\n", host[i], from,
                    HOST_MALLOC_FROM);
            failures++;
        }
    }
    const char *hidden[] = {"nxr_je_mallocx", "nxr_je_mallctl", "je_malloc", "je_mallocx",
                            "mallocx", "nxr__fault_arm", "nxr__malloc"};
    for (size_t i = 0; i < sizeof(hidden) / sizeof(hidden[0]); i++) {
        void *sym = dlsym(RTLD_DEFAULT, hidden[i]);
        /* A host that links jemalloc itself has its own mallocx: fine, as
         * long as it is that library's and not nxr's. */
        if (sym != NULL && strstr(object_of(sym), HOST_MALLOC_FROM) == NULL) {
            fprintf(stderr, "host_malloc: FAILED: %s is visible, in %s\n", hidden[i],
                    object_of(sym));
            failures++;
        }
    }
    if (dlsym(RTLD_DEFAULT, "nxr_runtime_create") == NULL) {
        fprintf(stderr, "host_malloc: FAILED: the public API is not visible either\n");
        failures++;
    }

    nxr_runtime_t *rt;
    int rc = nxr_runtime_create(NULL, &rt);
    void *p = NULL;
    if (rc == 0)
        rc = nxr_domain_malloc(nxr_runtime_domain_at(rt, 0), 1 << 20, 64, &p);
    if (rc == 0) {
        memset(p, 0x5a, 1 << 20);
        nxr_domain_free(p);
    } else {
        fprintf(stderr, "host_malloc: FAILED: nxr's allocation: %s\n", nxr_strerror(rc));
        failures++;
    }
    nxr_runtime_destroy(rt);
    void *q = malloc(1000); /* the host's own, after nxr ran */
    free(q);
    if (failures != 0)
        return 1;
    printf("host_malloc: ok, malloc is %s's, nxr's jemalloc and internals invisible\n",
           HOST_MALLOC_FROM);
    return 0;
}
