/*
 * One thread-local slot per thread for the detail of its last failed call
 * (nxr_last_error). Thread-local because the constructors have no object to
 * hold it yet, and because the participants of one operation may fail at
 * once, each on its own thread.
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

void nxr__last_error_clear(void)
{
    slot[0] = '\0';
}

void nxr__last_error_set(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(slot, sizeof(slot), fmt, ap);
    va_end(ap);
}

const char *nxr_last_error(void)
{
    return slot;
}
