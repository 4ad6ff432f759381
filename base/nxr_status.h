/*
 * nxr status codes.
 *
 * Every fallible nxr call returns an int: 0 on success, a negative errno
 * (-EINVAL, -ENOMEM, -EBUSY, ...) when the failure is what that errno means,
 * or one of the nxr codes below, which live in a reserved negative range
 * (NXR_ERANGE_FIRST..NXR_ERANGE_LAST) far from any errno value.
 * nxr_strerror() names every one of them.
 */
#ifndef NXR_STATUS_H
#define NXR_STATUS_H

#include <stdbool.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define NXR_API __attribute__((visibility("default")))
#else
#define NXR_API
#endif

enum nxr_status {
    NXR_OK = 0,
    NXR_ERANGE_FIRST = -1000,
    /* A domain was entered from one of its own workers (or while it is active). */
    NXR_EREENTRANT = -1001,
    /* Two managed domains' CPU sets overlap and neither declares the overlap. */
    NXR_EOVERLAP = -1002,
    /* Placement (where threads run and where memory lives) could not be
     * applied or verified. Its causes, each named in nxr_last_error():
     *   - a worker's pinning, or a thread's binding (nxr_ctx_bind), read back
     *     as another CPU set than the domain's;
     *   - memory that could not be bound to the domain's node, or whose
     *     pages the page check (move_pages) found on another node (pools,
     *     nxr_domain_malloc, replicas, packed weights);
     *   - a kernel provider whose threads cannot be confined to the domain
     *     under the provider policy (kernels/nxr_provider.h: its runs_on and
     *     count control against NXR_PROVIDER_POLICY), or a provider of
     *     threads of its own asked to run in a caller-managed domain;
     *   - a context on one domain given inputs that route elsewhere under the
     *     single-domain route policy is NXR_EMIXED, not this. */
    NXR_EPLACEMENT = -1003,
    /* A domain's CPU set is empty. */
    NXR_EEMPTYSET = -1004,
    /* A domain names a CPU outside the process's allowed set. */
    NXR_EDISALLOWED = -1005,
    /* Two domains share an id. */
    NXR_EDUPID = -1006,
    /* A thread budget is 0, negative or larger than the domain's CPU set. */
    NXR_EBUDGET = -1007,
    /* A configuration string (NXR_DOMAINS, NXR_TOPOLOGY, ...) is malformed. */
    NXR_ESYNTAX = -1008,
    /* The topology could not be discovered or loaded. */
    NXR_ETOPOLOGY = -1009,
    /* No domain has that id, or no domain could be formed at all. */
    NXR_ENODOMAIN = -1010,
    /* The request is valid but nothing configured can serve it. */
    NXR_EUNSUPPORTED = -1011,
    /* A caller-managed domain is already active (the admission guard). */
    NXR_EADMISSION = -1012,
    /* Buffers were still outstanding when their pool was shut down. */
    NXR_EOUTSTANDING = -1013,
    /* The object failed earlier and refuses further work. */
    NXR_EBROKEN = -1014,
    /* Foreign code changed the floating-point environment (it was restored). */
    NXR_EFPENV = -1015,
    /* An executor table is incomplete or inconsistent. */
    NXR_EEXECUTOR = -1016,
    /* A provider's classification is an impossible combination, its
     * function table is incomplete for its family, or it brings a global
     * thread count without being GLOBAL_OR_UNCONTROLLED (a configuration
     * error). */
    NXR_EPROVIDER = -1017,
    /* A call's inputs lie on several domains and the runtime's placement
     * policy requires one (NXR_ROUTE_SINGLE_DOMAIN). */
    NXR_EMIXED = -1018,
    /* The object was made before this process was forked from its parent:
     * its workers, permits and locks are the parent's. Returned at once by
     * every fallible call on an inherited runtime (and its domains), context
     * or job; destroy still frees what it safely can. Create a new runtime in
     * the child (docs/contracts.md, "fork"). */
    NXR_EFORKED = -1019,
    NXR_ERANGE_LAST = -1019,
};

/*
 * Names a status code: "NXR_EOVERLAP: ..." for nxr codes, the errno's
 * description for negative errnos, "success" for 0. Never returns NULL; the
 * string is static. Any thread may call it.
 */
NXR_API const char *nxr_strerror(int status);

/* True when status is one of nxr's own codes (not an errno). */
NXR_API bool nxr_status_is_nxr(int status);

/*
 * The detail of the calling thread's last failed nxr call: the call's name,
 * then the argument and the rule it broke, e.g. "nxr_sgemm: lda (3) < k (4)
 * with A not transposed". The one error-detail channel, with one rule for
 * every NXR_API function:
 *  - a function that can fail (one returning a status, plus nxr_mem_node)
 *    empties it when it starts and, when it fails, fills it with
 *    "<its own name>: <detail>"; so after a success it is "", and after a
 *    failure it is that failure's, never an earlier call's;
 *  - a function that cannot fail -- a getter, a name, a predicate, an
 *    *_init, a destroy, nxr_strerror, this function -- leaves it as it was,
 *    so reporting or cleaning up after a failure keeps its detail. Getters
 *    given a NULL handle return a neutral value (0, NULL, false, -1 for an
 *    id, NXR_NODE_NONE for a node, an enum's first value) and never crash.
 * Thread-local: the constructors have no object to hold a detail yet, and
 * each thread (a context's driver, or a worker failing inside a body) reads
 * its own. Never NULL; "" when there is no detail. Valid until the
 * thread's next fallible nxr call. nxr's tests hold every public function
 * to this rule, from a list generated from the headers. The one exception
 * is nxr_omp_executor_init, which lives in libnxr_omp, outside the library
 * that holds the slot (nxr_omp.h).
 */
NXR_API const char *nxr_last_error(void);

#ifdef __cplusplus
}
#endif

#endif /* NXR_STATUS_H */
