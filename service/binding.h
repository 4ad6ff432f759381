/*
 * Binding a serving thread to the CPUs of the domain it serves, so that
 * the work it runs itself (a request split over the domain: it takes part
 * as participant 0) stays on the domain, and verifying it.
 *
 * Stand-in until the runtime's own binding call (nxr_ctx_bind, planned by
 * the service-API issue) lands: then svc_bind_thread's body becomes that
 * call and this file goes.
 */
#ifndef NXR_SERVICE_BINDING_H
#define NXR_SERVICE_BINDING_H

#include <hwloc.h>

/* Confines the calling thread to `cpus` and reads the mask back. Returns 0,
 * -EINVAL (empty set), NXR_EPLACEMENT (the mask could not be set, or reads
 * back different) or -ENOMEM. */
int svc_bind_thread(hwloc_const_bitmap_t cpus);

#endif /* NXR_SERVICE_BINDING_H */
