/*
 * The fork generation (see internal/fork.h).
 */
#include "base/internal/fork.h"

#include <pthread.h>

atomic_ulong nxr__fork_gen;

static pthread_once_t watch_once = PTHREAD_ONCE_INIT;

/* Runs in the child, in its only thread, before fork returns there. */
static void child_after_fork(void)
{
    atomic_fetch_add_explicit(&nxr__fork_gen, 1, memory_order_relaxed);
}

static void watch(void)
{
    /* Fails only without memory for the handler table (ENOMEM); a runtime is
     * then not protected across fork, which is no worse than before. */
    (void)pthread_atfork(NULL, NULL, child_after_fork);
}

void nxr__fork_watch(void)
{
    pthread_once(&watch_once, watch);
}
