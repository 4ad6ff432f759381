/*
 * One thread-local slot per thread for the detail of its last failed call
 * (nxr_last_error), and the pair every fallible public function brackets
 * itself with (nxr__call_begin, nxr__fail: base/internal/last_error.h).
 * Thread-local because the constructors have no object to hold it yet,
 * and because the participants of one operation may fail at once, each on
 * its own thread.
 */
#include <stdarg.h>
#include <stdio.h>

#include "base/internal/last_error.h"
#include "base/nxr_status.h"

static _Thread_local char slot[NXR__LAST_ERROR_BYTES];

char *nxr__last_error_slot(void)
{
    return slot;
}

void nxr__call_begin(void)
{
    slot[0] = '\0';
}

int nxr__fail(int rc, const char *call, const char *fmt, ...)
{
    /* Formatted aside first: the detail may quote the slot itself (an
     * inner call's detail under the outer call's name). */
    char detail[NXR__LAST_ERROR_BYTES];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(detail, sizeof(detail), fmt, ap);
    va_end(ap);
    if (snprintf(slot, sizeof(slot), "%s: %s", call, detail) < 0)
        slot[0] = '\0';
    return rc;
}

const char *nxr_last_error(void)
{
    return slot;
}
