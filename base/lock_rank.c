/*
 * The lock-rank check (internal/lock_rank.h): each thread keeps the ranks of
 * the locks it holds, in the order it took them; an acquisition is checked
 * against the highest. A handful of locks at most are ever held at once, so
 * a small array and a linear search are the whole bookkeeping.
 */
#include "base/internal/lock_rank.h"

#include <stdio.h>
#include <stdlib.h>

/* Deeper than any chain of the table (every rank once). */
#define HELD_MAX 32

static _Thread_local unsigned char held[HELD_MAX];
static _Thread_local unsigned depth;

static const char *const names[NXR__RANK_END] = {
    [NXR__RANK_TEAM_RUN] = "a team's run_lock",
    [NXR__RANK_RUNTIME_DOMAINS] = "the runtime's domains_lock",
    [NXR__RANK_RUNTIME_CTX] = "the runtime's ctx_lock",
    [NXR__RANK_ADMISSION] = "a domain's admission lock (exec->lock)",
    [NXR__RANK_COUNT_GATE] = "the count gate (kernels/global_count.c)",
    [NXR__RANK_PROCESS_ARBITER] = "the process arbiter's reference lock",
    [NXR__RANK_ARBITER] = "the arbiter's mutex",
    [NXR__RANK_TEAM_QUEUE] = "a team's queue_lock",
    [NXR__RANK_TEAM_START] = "a team's start_lock",
    [NXR__RANK_POOL] = "a domain pool's lock",
    [NXR__RANK_ARENA] = "the mmap arena's lock",
    [NXR__RANK_QUARANTINE] = "the handle quarantine's lock",
    [NXR__RANK_MEM_REGISTRY] = "the memory registry's lock",
};

const char *nxr__lock_rank_name(enum nxr__lock_rank rank)
{
    if ((int)rank <= 0 || rank >= NXR__RANK_END || names[rank] == NULL)
        return "?";
    return names[rank];
}

static _Noreturn void violated(const char *what, enum nxr__lock_rank rank, const char *detail)
{
    fprintf(
        stderr,
        "nxr: lock order violated: %s %s (rank %d) %s; the order is in base/internal/lock_rank.h\n",
        what, nxr__lock_rank_name(rank), (int)rank, detail);
    abort();
}

void nxr__lock_rank_acquire(enum nxr__lock_rank rank)
{
    if ((int)rank <= 0 || rank >= NXR__RANK_END)
        violated("taking", rank, "which has no rank");
    for (unsigned i = 0; i < depth; i++)
        if (held[i] >= (unsigned char)rank) {
            char detail[160];
            snprintf(detail, sizeof detail, "while holding %s (rank %d)",
                     nxr__lock_rank_name((enum nxr__lock_rank)held[i]), (int)held[i]);
            violated("taking", rank, detail);
        }
    if (depth == HELD_MAX)
        violated("taking", rank, "with too many locks held");
    held[depth++] = (unsigned char)rank;
}

void nxr__lock_rank_release(enum nxr__lock_rank rank)
{
    /* Most recent hold first: locks are usually released in reverse. */
    for (unsigned i = depth; i-- > 0;)
        if (held[i] == (unsigned char)rank) {
            for (unsigned j = i; j + 1 < depth; j++)
                held[j] = held[j + 1];
            depth--;
            return;
        }
    violated("releasing", rank, "which this thread does not hold");
}

void nxr__lock_rank_assert_none(const char *what)
{
    if (depth == 0)
        return;
    const enum nxr__lock_rank top = (enum nxr__lock_rank)held[depth - 1];
    fprintf(stderr,
            "nxr: lock order violated: %s (rank %d) is held while %s, which must hold no lock; "
            "the order is in base/internal/lock_rank.h\n",
            nxr__lock_rank_name(top), (int)top, what != NULL ? what : "waiting");
    abort();
}

unsigned nxr__lock_rank_held(void)
{
    return depth;
}

bool nxr__lock_rank_checking(void)
{
#if defined(NXR_CHECKED) && NXR_CHECKED
    return true;
#else
    return false;
#endif
}
