/*
 * Build-mode switches of nxr's allocators, kept here so that no .c file
 * needs an #ifdef.
 *
 * AddressSanitizer manual poisoning: memory a pool caches or a scope has
 * reset is poisoned, so an ASan build reports a use of it at the faulting
 * access. Without ASan the macros compile to nothing.
 *
 * NXR__SCOPE_CHECKED_DEFAULT: checked builds of nxr (NXR_CHECKED=1, which
 * --config=checked and --config=asan define) check every scope unless the
 * caller says otherwise. NXR__BUFFER_CHECKED: the same builds check that a
 * buffer handed to nxr_buffer_export is still acquired.
 */
#ifndef NXR_INTERNAL_DEBUG_H
#define NXR_INTERNAL_DEBUG_H

#include <stdbool.h>

#include "base/internal/build.h"

#define NXR__SCOPE_CHECKED_DEFAULT (NXR__CHECKED_BUILD != 0)
#define NXR__BUFFER_CHECKED        NXR__CHECKED_BUILD

#if defined(__SANITIZE_ADDRESS__)
#define NXR__ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define NXR__ASAN 1
#endif
#endif

#ifdef NXR__ASAN
#include <sanitizer/asan_interface.h>
#define nxr__asan_poison(p, n)   ASAN_POISON_MEMORY_REGION((p), (n))
#define nxr__asan_unpoison(p, n) ASAN_UNPOISON_MEMORY_REGION((p), (n))
#else
#define nxr__asan_poison(p, n)   ((void)(p), (void)(n))
#define nxr__asan_unpoison(p, n) ((void)(p), (void)(n))
#endif

#endif /* NXR_INTERNAL_DEBUG_H */
