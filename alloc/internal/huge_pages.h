/*
 * Huge pages for long-lived memory that is streamed whole (packed weights):
 * the system's transparent-huge-page mode, the advice, and how much of a
 * range the kernel backs with huge pages now.
 *
 * Why: a decode step reads every weight once per token; on 4 KiB pages that
 * is a TLB miss every 4 KiB (a two-level walk under virtualisation). Most
 * distributions run THP in `madvise` mode, where only advised ranges get huge
 * pages, so nxr advises the ranges it owns whole. The advice goes on before
 * the first touch, after the node binding (mbind), so pages fault in huge and
 * on the domain's node; the page check (nxr_mem_node) is unchanged.
 */
#ifndef NXR_ALLOC_INTERNAL_HUGE_PAGES_H
#define NXR_ALLOC_INTERNAL_HUGE_PAGES_H

#include <stdbool.h>
#include <stddef.h>

/* The huge page size transparent huge pages use on x86-64 and most arm64
 * kernels (a PMD). Ranges are advised in whole multiples of it. */
#define NXR__HUGE_PAGE_SIZE ((size_t)2 << 20)

enum nxr__thp_mode {
    NXR__THP_UNKNOWN, /* the setting could not be read (no sysfs, no THP) */
    NXR__THP_NEVER,
    NXR__THP_MADVISE,
    NXR__THP_ALWAYS,
};

/* The bracketed choice of a line of /sys/kernel/mm/transparent_hugepage/enabled
 * ("always [madvise] never"); NXR__THP_UNKNOWN for anything else. */
enum nxr__thp_mode nxr__thp_mode_parse(const char *line);

/* The system's mode now (read each call: an administrator may change it). */
enum nxr__thp_mode nxr__thp_mode(void);

/* Whether advised ranges can get huge pages in this mode (madvise, always). */
bool nxr__thp_mode_advisable(enum nxr__thp_mode mode);

/* "unknown", "never", "madvise" or "always". */
const char *nxr__thp_mode_name(enum nxr__thp_mode mode);

/* Whether an allocation of `bytes` is worth huge pages: at least one. */
bool nxr__huge_worth(size_t bytes);

/* bytes rounded up to whole huge pages (an advised range owns its last huge
 * page too, so no neighbour shares it). bytes <= SIZE_MAX - NXR__HUGE_PAGE_SIZE. */
size_t nxr__huge_round(size_t bytes);

/* Advises [p, p + bytes) (p and bytes multiples of NXR__HUGE_PAGE_SIZE) for
 * huge pages. True when the kernel took the advice and its mode can give
 * huge pages for it (madvise or always); false otherwise (mode never, or the
 * advice refused): the memory is as good as without it, on small pages. */
bool nxr__huge_advise(void *p, size_t bytes);

#endif /* NXR_ALLOC_INTERNAL_HUGE_PAGES_H */
