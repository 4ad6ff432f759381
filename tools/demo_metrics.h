/*
 * `nxr demo --metrics-port N`: the demo's live counters as a Prometheus page
 * on 127.0.0.1:N while it runs (examples/metrics_server.h serves it; the
 * demo's runtime comes through its runtime_hook). Before the runtime exists
 * the page says so; after it is gone the page is its last counters, taken
 * just before it went. --metrics-hold K keeps the page up after the run
 * until K requests were answered (scripts and tests that scrape the final
 * counters); without it the page goes with the demo.
 */
#ifndef NXR_TOOLS_DEMO_METRICS_H
#define NXR_TOOLS_DEMO_METRICS_H

#include <stdbool.h>
#include <stddef.h>
#include <pthread.h>

#include "runtime/nxr.h"

struct metrics_server;

struct nxr_tool_metrics {
    struct metrics_server *srv;
    pthread_mutex_t lock;
    nxr_runtime_t *rt; /* under lock: the demo's runtime while it lives */
    char *last;        /* under lock: its last page, once it is gone */
    size_t last_len;
    long hold;
};

/* Starts the page on port (0: a free one) and says where on stderr. 0, or
 * the exit status 1 having said why. */
int nxr_tool_metrics_start(struct nxr_tool_metrics *m, unsigned port, long hold);
/* The demos' runtime_hook. */
void nxr_tool_metrics_hook(void *arg, nxr_runtime_t *rt, bool ending);
/* After the run: waits for --metrics-hold's requests, then stops the page. */
void nxr_tool_metrics_finish(struct nxr_tool_metrics *m);

#endif /* NXR_TOOLS_DEMO_METRICS_H */
