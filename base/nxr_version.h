/*
 * nxr version: which release these headers belong to, and which release the
 * library a host runs with is.
 *
 * The two can differ: a host compiled against 1.0.0 may run with a newer
 * libnxr.so.1. NXR_VERSION is the headers' version, nxr_version() the
 * library's; a host that needs something added in a later minor release
 * checks nxr_version() >= NXR_VERSION_ENCODE(1, 1, 0) before using it.
 *
 * ABI: the shared library's soname is libnxr.so.<NXR_VERSION_MAJOR> (the
 * build derives it from the macro below, nowhere else), and its exported
 * functions carry the symbol version NXR_<NXR_VERSION_MAJOR>. A release that
 * removes or changes a public function, struct or enum value bumps the major;
 * one that only adds bumps the minor; a fix bumps the patch.
 */
#ifndef NXR_VERSION_H
#define NXR_VERSION_H

#include "base/nxr_status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The one place the version is written; each part is 0..255. */
#define NXR_VERSION_MAJOR 1
#define NXR_VERSION_MINOR 0
#define NXR_VERSION_PATCH 0

/* One comparable number: major << 16 | minor << 8 | patch. */
#define NXR_VERSION_ENCODE(major, minor, patch)                                                    \
    (((unsigned)(major) << 16) | ((unsigned)(minor) << 8) | (unsigned)(patch))
#define NXR_VERSION NXR_VERSION_ENCODE(NXR_VERSION_MAJOR, NXR_VERSION_MINOR, NXR_VERSION_PATCH)

/* The library's version, NXR_VERSION_ENCODE(major, minor, patch) of the
 * release it was built from (not of the headers the caller compiled
 * against). Any thread, any time, before or without a runtime. */
NXR_API unsigned nxr_version(void);

/* The same as "major.minor.patch" (e.g. "1.0.0"); static, never NULL. */
NXR_API const char *nxr_version_string(void);

#ifdef __cplusplus
}
#endif

#endif /* NXR_VERSION_H */
