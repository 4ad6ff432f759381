/*
 * nxr's opaque handles, each declared once (the 1.0 typedef policy). A handle is a struct whose fields only nxr
 * reads; it is typedef'd as nxr_<name>_t and passed by pointer. Structs
 * whose fields the caller fills or reads (options, argument structs, ops
 * tables, descriptors) are never typedef'd: they are written `struct
 * nxr_<name>` everywhere.
 *
 * Every public header that names a handle includes this one, so a
 * translation unit sees each typedef exactly once (C99 rejects a typedef
 * declared twice; C11 and C++ accept it, -pedantic C99 does not).
 */
#ifndef NXR_FWD_H
#define NXR_FWD_H

#ifdef __cplusplus
extern "C" {
#endif

typedef struct nxr_runtime nxr_runtime_t;     /* runtime/nxr.h */
typedef struct nxr_domain nxr_domain_t;       /* runtime/nxr.h */
typedef struct nxr_ctx nxr_ctx_t;             /* runtime/nxr_ctx.h */
typedef struct nxr_thread_binding nxr_thread_binding_t; /* runtime/nxr_ctx.h */
typedef struct nxr_shards nxr_shards_t;       /* runtime/nxr_span.h */
typedef struct nxr_weights nxr_weights_t;     /* runtime/nxr_weights.h */
typedef struct nxr_step nxr_step_t;           /* runtime/nxr_step.h */
typedef struct nxr_job nxr_job_t;             /* executor/nxr_executor.h */
typedef struct nxr_buffer nxr_buffer_t;       /* alloc/nxr_alloc.h */
typedef struct nxr_scope nxr_scope_t;         /* alloc/nxr_alloc.h */
typedef struct nxr_provider nxr_provider_t;   /* kernels/nxr_provider.h */
typedef struct nxr_provider_bundle nxr_provider_bundle_t; /* kernels/nxr_provider.h */

#ifdef __cplusplus
}
#endif

#endif /* NXR_FWD_H */
