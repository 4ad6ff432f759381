/*
 * A /metrics page on a plain socket: one thread accepts on 127.0.0.1 and
 * answers each connection once (HTTP/1.0, Connection: close) with the page
 * its source writes (nxr_runtime_metrics's Prometheus text, usually), 404
 * anywhere but /metrics. No HTTP library. Used by examples/metrics_http.c and
 * by `nxr demo --metrics-port`.
 *
 * Waits: the accept loop polls its socket for at most 200 ms at a time and
 * looks at the stop flag between polls, so metrics_server_stop returns
 * within about that; a scraper that connects and sends nothing is given
 * 2 s (SO_RCVTIMEO) before the connection is dropped.
 */
#ifndef NXR_EXAMPLES_METRICS_SERVER_H
#define NXR_EXAMPLES_METRICS_SERVER_H

#include <stddef.h>

#include <nxr/nxr.h>

/* Writes the page: *page from malloc (the server frees it) and its length;
 * returns 0 or an nxr status, answered as a 500 naming it. */
typedef int (*metrics_page_fn)(void *arg, char **page, size_t *len);

struct metrics_server;

/* Listens on 127.0.0.1:port (0: a free port, written to *bound_port) and
 * serves on a thread of its own. 0 or -errno. */
int metrics_server_start(unsigned port, metrics_page_fn page, void *arg,
                         struct metrics_server **out, unsigned *bound_port);

/* Blocks until at least n requests were answered (any path), or the server
 * stopped. Returns how many were answered. */
long metrics_server_wait(struct metrics_server *s, long n);

/* Stops the thread, closes the socket, frees s (NULL: a no-op). */
void metrics_server_stop(struct metrics_server *s);

/* A metrics_page_fn body for one runtime: nxr_runtime_metrics into a
 * buffer of the right size (asked for first, grown if it grew). */
int metrics_runtime_page(const nxr_runtime_t *rt, char **page, size_t *len);

#endif /* NXR_EXAMPLES_METRICS_SERVER_H */
