/*
 * The stall reporter (see internal/stall.h): formatting and counting. The
 * waits themselves stay where they are (admission.c, team.c, run.c); each
 * sleeps with a deadline at the report time, reports once, then sleeps on.
 */
#include "executor/internal/stall.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

#include "base/strbuf.h"
#include "domains/internal/cpuset.h"
#include "executor/internal/exec.h"

uint64_t nxr__stall_deadline(const struct nxr__stall *stall, uint64_t start)
{
    if (stall == NULL || stall->after_ns == 0)
        return 0;
    return start > UINT64_MAX - stall->after_ns ? UINT64_MAX : start + stall->after_ns;
}

void nxr__stall_report(struct nxr__stall *stall, const struct nxr__exec *exec, const char *what,
                       uint64_t waited_ns)
{
    if (stall == NULL || stall->after_ns == 0)
        return;
    char list[256];
    struct nxr__strbuf sb = {0};
    nxr__strbuf_printf(&sb, "nxr: stall: %s on domain %d (cpus %s) has waited %" PRIu64 " ms", what,
                       exec->spec->id,
                       exec->spec->cpus != NULL
                           ? nxr__cpuset_list(exec->spec->cpus, list, sizeof(list))
                           : "none, caller-managed",
                       waited_ns / 1000000u);
    if (stall->who != NULL)
        stall->who(stall->who_ctx, exec, &sb);
    /* Relaxed: a counter, read by describe. */
    atomic_fetch_add_explicit(&stall->reports, 1, memory_order_relaxed);
    char *line = NULL;
    if (nxr__strbuf_take(&sb, &line) != 0 || line == NULL) {
        fprintf(stderr, "nxr: stall: %s on domain %d (out of memory for the details)\n", what,
                exec->spec->id);
        return;
    }
    if (stall->sink != NULL)
        stall->sink(stall->sink_arg, line);
    else
        fprintf(stderr, "%s\n", line);
    free(line);
}
