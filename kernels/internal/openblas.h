/*
 * nxr's OpenBLAS provider, internals: the pure parts of the probe (how a
 * threading model is classified, which vector ISA an OpenBLAS core name
 * stands for, when a core is a fallback), testable with any input.
 */
#ifndef NXR_KERNELS_INTERNAL_OPENBLAS_H
#define NXR_KERNELS_INTERNAL_OPENBLAS_H

#include <stdbool.h>
#include <stddef.h>

#include "kernels/internal/cpu.h"
#include "kernels/nxr_provider.h"

/* openblas_get_parallel() -> threading model and classification: 0 is
 * SEQUENTIAL x CALLING_THREAD; 1 (pthreads), 2 (OpenMP) and anything
 * unknown are GLOBAL_OR_UNCONTROLLED x EXTERNAL_WORKERS (the count is
 * process-global in both builds; openblas_set_num_threads_local sets the
 * global count too). */
void nxr__openblas_classify(int parallel, enum nxr_openblas_threading *threading,
                            enum nxr_count_control *count, enum nxr_provider_runs_on *placement);

/* The vector ISA an OpenBLAS core name's kernels use (case-insensitive;
 * NXR_TIER_UNKNOWN for names not in the table). */
enum nxr__isa_tier nxr__openblas_core_tier(const char *core);

/* True when `core` is at least two tiers below `cpu` (Prescott's SSE3
 * kernels on an AVX2 CPU, Sandybridge's on AVX-512); writes why to msg.
 * Unknown tiers never flag. */
bool nxr__openblas_core_fallback(const char *core, enum nxr__isa_tier cpu, char *msg,
                                 size_t msg_size);

const char *nxr__isa_tier_name(enum nxr__isa_tier tier);

/* Whether the process already has OpenBLAS loaded (linked by the host, or
 * loaded by an earlier probe or provider). Never loads it. */
bool nxr__openblas_loaded(void);

/* nxr_openblas_probe when OpenBLAS is already loaded; else *out says
 * nothing (present false, threading UNKNOWN), and nothing is loaded: no
 * OpenBLAS thread starts. */
void nxr__openblas_probe_loaded(struct nxr_openblas_info *out);

#endif /* NXR_KERNELS_INTERNAL_OPENBLAS_H */
