/*
 * nxr after fork(): which process an object was made in.
 *
 * fork() copies the calling thread only. An nxr object made before it
 * (runtime, context, job) has workers, permits and locks that belong to the
 * parent: in the child the workers do not exist, a lock another parent
 * thread held stays held for ever, and a wait for a worker never ends. So
 * every object records the fork generation it was made in, every public call
 * compares it with the current one first and answers NXR_EFORKED at once in
 * another process, and destroy frees only what it can without a lock or a
 * join (docs/contracts.md, "fork").
 *
 * The generation is a process-wide counter that a pthread_atfork child
 * handler increments (registered once, by the first runtime). A raw clone
 * or vfork that skips the atfork handlers is not seen; posix_spawn and
 * fork+exec need nothing.
 *
 * Modules with process-wide state of their own (the process arbiter, the
 * global-count gate) register pthread_atfork child handlers of their own,
 * which reset that state to "nothing held": the parent's holders do not
 * exist in the child.
 */
#ifndef NXR_INTERNAL_FORK_H
#define NXR_INTERNAL_FORK_H

#include <stdatomic.h>
#include <stdbool.h>

extern atomic_ulong nxr__fork_gen;

/* Registers the generation's child handler (once per process; any thread). */
void nxr__fork_watch(void);

/* The current generation. Relaxed: the counter changes only in a child's
 * atfork handler, before the child runs anything else. */
static inline unsigned long nxr__fork_generation(void)
{
    return atomic_load_explicit(&nxr__fork_gen, memory_order_relaxed);
}

/* True when an object made in generation `gen` was inherited through fork. */
static inline bool nxr__forked_since(unsigned long gen)
{
    return nxr__fork_generation() != gen;
}

#endif /* NXR_INTERNAL_FORK_H */
