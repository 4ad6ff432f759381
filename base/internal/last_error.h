/*
 * The calling thread's last-error slot behind nxr_last_error
 * (base/nxr_status.h). Callers that report detail empty it when they start
 * (nxr__last_error_clear) and write into it on failure, either through a
 * formatter or by handing the slot to code that fills an (err, errsz) pair.
 */
#ifndef NXR_BASE_INTERNAL_LAST_ERROR_H
#define NXR_BASE_INTERNAL_LAST_ERROR_H

#include <stddef.h>

/* Bytes in the slot, the terminator included; a longer detail is cut. */
#define NXR__LAST_ERROR_BYTES 512

/* The calling thread's slot (NXR__LAST_ERROR_BYTES long). */
char *nxr__last_error_slot(void);

/* Empties the slot: the start of a call that reports detail. */
void nxr__last_error_clear(void);

/* Writes the slot, printf-style. */
void nxr__last_error_set(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif /* NXR_BASE_INTERNAL_LAST_ERROR_H */
