/*
 * What the build decides, interpreted in one place so that no other file
 * tests a build macro itself.
 *
 * NXR__CHECKED_BUILD: 1 in checked builds (-DNXR_CHECKED=1, which
 * --config=checked and --config=asan define), else 0. Misuse that other
 * builds report or leave undefined aborts with a message instead. A constant,
 * so .c files test it in plain `if`s (both branches compile in every build);
 * `#if NXR__CHECKED_BUILD` where a declaration exists only in checked builds.
 *
 * NXR__CACHE_LINE: the line size contended atomics are aligned to (64 bytes on
 * every target nxr builds for; false sharing, not correctness, is at stake).
 */
#ifndef NXR_BASE_INTERNAL_BUILD_H
#define NXR_BASE_INTERNAL_BUILD_H

#if defined(NXR_CHECKED) && NXR_CHECKED
#define NXR__CHECKED_BUILD 1
#else
#define NXR__CHECKED_BUILD 0
#endif

#define NXR__CACHE_LINE 64

#endif /* NXR_BASE_INTERNAL_BUILD_H */
