/*
 * nxr_version: the release the library was built from, taken from the
 * macros of base/nxr_version.h when this file is compiled (so a host that
 * compiled against other headers can tell).
 */
#include "base/nxr_version.h"

#include <assert.h>

static_assert(NXR_VERSION_MAJOR <= 255 && NXR_VERSION_MINOR <= 255 && NXR_VERSION_PATCH <= 255,
              "each version part must fit the 8 bits NXR_VERSION_ENCODE gives it");

#define STRINGIFY(x) #x
#define VERSION_STRING(major, minor, patch) STRINGIFY(major) "." STRINGIFY(minor) "." STRINGIFY(patch)

unsigned nxr_version(void)
{
    return NXR_VERSION;
}

const char *nxr_version_string(void)
{
    return VERSION_STRING(NXR_VERSION_MAJOR, NXR_VERSION_MINOR, NXR_VERSION_PATCH);
}
