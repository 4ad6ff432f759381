/*
 * A /metrics page beside a service: nxr's live counters
 * (nxr_runtime_metrics, Prometheus text) served by a plain socket loop on
 * its own thread, no HTTP library. The "service" here is a stream of small
 * runs on every domain, so the counters move while a scraper watches.
 *
 *     metrics_http [--port N] [--requests N]
 *
 * --port 0 (the default) takes a free port; the port is printed on stdout
 * as "port N" once the socket listens (127.0.0.1 only: a metrics page is
 * not for the whole network unless the operator says so). --requests N
 * exits after N HTTP requests (tests); 0 serves until killed.
 * Run: bazel run //examples:metrics_http -- --port 9464
 * Outside the tree: cc metrics_http.c $(pkg-config --cflags --libs nxr) -pthread
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* nxr's headers use cpu_set_t */
#endif
#include <nxr/nxr.h>

#include "metrics_server.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---- the service: small runs on every domain until told to stop ---------- */

static atomic_int stopping;

static int small_task(void *arg, size_t i)
{
    volatile double *sink = arg;
    *sink += (double)i * 0.5;
    return 0;
}

static void *serve_work(void *p)
{
    nxr_runtime_t *rt = p;
    size_t n = nxr_runtime_domain_count(rt);
    nxr_ctx_t **ctx = calloc(n, sizeof(*ctx));
    if (ctx == NULL)
        return NULL;
    for (size_t i = 0; i < n; i++)
        if (nxr_ctx_create(rt, nxr_domain_id(nxr_runtime_domain_at(rt, i)), &ctx[i]) != 0)
            ctx[i] = NULL;
    volatile double sink = 0;
    while (!atomic_load(&stopping)) {
        for (size_t i = 0; i < n; i++)
            if (ctx[i] != NULL)
                (void)nxr_run(ctx[i], NXR_MODE_OUTER, 64, small_task, (void *)&sink);
        usleep(1000); /* a request every millisecond or so */
    }
    for (size_t i = 0; i < n; i++)
        nxr_ctx_destroy(ctx[i]);
    free(ctx);
    return NULL;
}

/* ---- the page: this runtime's counters -------------------------------------- */

static int page_of(void *arg, char **page, size_t *len)
{
    return metrics_runtime_page(arg, page, len);
}

int main(int argc, char **argv)
{
    long port = 0, requests = 0;
    for (int i = 1; i < argc; i++) {
        char *end = NULL;
        if (strcmp(argv[i], "--port") == 0 && i + 1 < argc)
            port = strtol(argv[++i], &end, 10);
        else if (strcmp(argv[i], "--requests") == 0 && i + 1 < argc)
            requests = strtol(argv[++i], &end, 10);
        if (end == NULL || *end != '\0' || port < 0 || port > 65535 || requests < 0) {
            fprintf(stderr, "usage: metrics_http [--port 0..65535] [--requests N]\n");
            return 2;
        }
    }
    nxr_runtime_t *rt;
    int rc = nxr_runtime_create(NULL, &rt);
    if (rc != 0) {
        fprintf(stderr, "metrics_http: %s: %s\n", nxr_strerror(rc), nxr_last_error());
        return 1;
    }
    struct metrics_server *srv;
    unsigned bound;
    rc = metrics_server_start((unsigned)port, page_of, rt, &srv, &bound);
    if (rc != 0) {
        fprintf(stderr, "metrics_http: the socket: %s\n", strerror(-rc));
        nxr_runtime_destroy(rt);
        return 1;
    }
    printf("port %u\n", bound);
    fflush(stdout);

    pthread_t worker;
    bool working = pthread_create(&worker, NULL, serve_work, rt) == 0;
    if (requests > 0)
        metrics_server_wait(srv, requests);
    else
        for (;;)
            pause(); /* serves until killed */
    metrics_server_stop(srv);
    atomic_store(&stopping, 1);
    if (working)
        pthread_join(worker, NULL);
    nxr_runtime_destroy(rt);
    return 0;
}
