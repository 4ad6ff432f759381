/*
 * The calling thread's last-error slot behind nxr_last_error
 * (base/nxr_status.h), and the one rule every public function follows with
 * it (written there): a fallible NXR_API function calls nxr__call_begin()
 * first, which empties the slot, and reports each failure through
 * nxr__fail(), which writes "<function>: <detail>" and hands the status
 * back; a function that cannot fail (a getter, a name, an *_init, a
 * destroy) leaves the slot as it is, so that the detail of a failure
 * survives the calls a caller makes to report or clean up after it.
 */
#ifndef NXR_BASE_INTERNAL_LAST_ERROR_H
#define NXR_BASE_INTERNAL_LAST_ERROR_H

#include <stddef.h>

/* Bytes in the slot, the terminator included; a longer detail is cut. */
#define NXR__LAST_ERROR_BYTES 512

/* The calling thread's slot (NXR__LAST_ERROR_BYTES long), for code that
 * fills an (err, errsz) pair. */
char *nxr__last_error_slot(void);

/* The start of a fallible NXR_API function: empties the slot. */
void nxr__call_begin(void);

/* A failure of the public function `call`: writes "<call>: <detail>"
 * (printf-style) into the slot and returns rc, so that a failure path is
 * `return nxr__fail(-EINVAL, __func__, "out is NULL");`. */
int nxr__fail(int rc, const char *call, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

#endif /* NXR_BASE_INTERNAL_LAST_ERROR_H */
