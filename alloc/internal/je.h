/*
 * nxr's private jemalloc: the entry points of the copy linked from
 * //third_party/jemalloc, renamed nxr_je_<name> there (privatize.sh). The
 * types and MALLOCX_* flags come from jemalloc's own header; its unprefixed
 * functions (malloc, mallocx, ...) must never be called from nxr: they are
 * not linked, and in a host that uses jemalloc they would be the host's.
 */
#ifndef NXR_INTERNAL_JE_H
#define NXR_INTERNAL_JE_H

#include <jemalloc/jemalloc.h>
#include <stddef.h>

void *nxr_je_mallocx(size_t size, int flags);
void nxr_je_dallocx(void *ptr, int flags);
void nxr_je_sdallocx(void *ptr, size_t size, int flags);
size_t nxr_je_nallocx(size_t size, int flags);
size_t nxr_je_sallocx(const void *ptr, int flags);
int nxr_je_mallctl(const char *name, void *oldp, size_t *oldlenp, void *newp, size_t newlen);

#endif /* NXR_INTERNAL_JE_H */
