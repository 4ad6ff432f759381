/*
 * Huge pages for packed weights (see internal/huge_pages.h for why).
 */
#include "alloc/internal/huge_pages.h"

#include <stdint.h>
#include <string.h>
#include <sys/mman.h>

#include "base/internal/sys.h"

static const char *const mode_names[] = {
    [NXR__THP_UNKNOWN] = "unknown",
    [NXR__THP_NEVER] = "never",
    [NXR__THP_MADVISE] = "madvise",
    [NXR__THP_ALWAYS] = "always",
};

enum nxr__thp_mode nxr__thp_mode_parse(const char *line)
{
    const char *open = strchr(line, '[');
    const char *close = open != NULL ? strchr(open, ']') : NULL;
    if (close == NULL)
        return NXR__THP_UNKNOWN;
    size_t len = (size_t)(close - open - 1);
    for (int m = NXR__THP_NEVER; m <= NXR__THP_ALWAYS; m++)
        if (strlen(mode_names[m]) == len && strncmp(open + 1, mode_names[m], len) == 0)
            return (enum nxr__thp_mode)m;
    return NXR__THP_UNKNOWN;
}

static int take_mode(void *arg, char *line)
{
    *(enum nxr__thp_mode *)arg = nxr__thp_mode_parse(line);
    return 1; /* the file is one line */
}

enum nxr__thp_mode nxr__thp_mode(void)
{
    enum nxr__thp_mode mode = NXR__THP_UNKNOWN;
    (void)nxr__read_lines("/sys/kernel/mm/transparent_hugepage/enabled", take_mode, &mode);
    return mode;
}

bool nxr__thp_mode_advisable(enum nxr__thp_mode mode)
{
    return mode == NXR__THP_MADVISE || mode == NXR__THP_ALWAYS;
}

const char *nxr__thp_mode_name(enum nxr__thp_mode mode)
{
    return (unsigned)mode <= NXR__THP_ALWAYS ? mode_names[mode] : mode_names[NXR__THP_UNKNOWN];
}

bool nxr__huge_worth(size_t bytes)
{
    return bytes >= NXR__HUGE_PAGE_SIZE && bytes <= SIZE_MAX - NXR__HUGE_PAGE_SIZE;
}

size_t nxr__huge_round(size_t bytes)
{
    return (bytes + NXR__HUGE_PAGE_SIZE - 1) / NXR__HUGE_PAGE_SIZE * NXR__HUGE_PAGE_SIZE;
}

bool nxr__huge_advise(void *p, size_t bytes)
{
    if (!nxr__thp_mode_advisable(nxr__thp_mode()))
        return false;
    return nxr__madvise(p, bytes, MADV_HUGEPAGE) == 0;
}
