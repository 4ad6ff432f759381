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

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
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

/* ---- the page: one HTTP/1.0 answer per connection ------------------------- */

static void send_all(int fd, const char *s, size_t n)
{
    while (n > 0) {
        ssize_t w = send(fd, s, n, MSG_NOSIGNAL);
        if (w <= 0)
            return; /* the scraper went away: nothing to do */
        s += w;
        n -= (size_t)w;
    }
}

static void answer(int fd, const char *status, const char *type, const char *body, size_t len)
{
    char head[256];
    int h = snprintf(head, sizeof(head),
                     "HTTP/1.0 %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\n"
                     "Connection: close\r\n\r\n",
                     status, type, len);
    send_all(fd, head, (size_t)h);
    send_all(fd, body, len);
}

/* Reads the request line; answers /metrics with the page, anything else 404. */
static void serve_one(int fd, const nxr_runtime_t *rt)
{
    char req[1024];
    size_t got = 0;
    while (got < sizeof(req) - 1) { /* up to the end of the request line */
        ssize_t r = recv(fd, req + got, sizeof(req) - 1 - got, 0);
        if (r <= 0)
            break;
        got += (size_t)r;
        req[got] = '\0';
        if (strstr(req, "\r\n") != NULL || strchr(req, '\n') != NULL)
            break;
    }
    req[got] = '\0';
    if (strncmp(req, "GET /metrics ", 13) != 0 && strncmp(req, "GET /metrics\r", 13) != 0) {
        const char *msg = "not found: the page is /metrics\n";
        answer(fd, "404 Not Found", "text/plain", msg, strlen(msg));
        return;
    }
    size_t len = 0;
    char *page = NULL;
    int rc = nxr_runtime_metrics(rt, NULL, 0, &len); /* the length, then the page */
    for (int tries = 0; rc == -ENOSPC && tries < 4; tries++) {
        free(page);
        page = malloc(len + 1);
        if (page == NULL) {
            rc = -ENOMEM;
            break;
        }
        rc = nxr_runtime_metrics(rt, page, len + 1, &len); /* it may have grown */
    }
    if (rc != 0) {
        char msg[256];
        int n = snprintf(msg, sizeof(msg), "nxr_runtime_metrics: %s\n", nxr_strerror(rc));
        answer(fd, "500 Internal Server Error", "text/plain", msg, (size_t)n);
    } else {
        answer(fd, "200 OK", "text/plain; version=0.0.4", page, len);
    }
    free(page);
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
    int lfd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in addr = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    int one = 1;
    socklen_t alen = sizeof(addr);
    if (lfd < 0 || setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) != 0 ||
        bind(lfd, (struct sockaddr *)&addr, sizeof(addr)) != 0 || listen(lfd, 16) != 0 ||
        getsockname(lfd, (struct sockaddr *)&addr, &alen) != 0) {
        perror("metrics_http: socket");
        nxr_runtime_destroy(rt);
        return 1;
    }
    printf("port %u\n", (unsigned)ntohs(addr.sin_port));
    fflush(stdout);

    pthread_t worker;
    bool working = pthread_create(&worker, NULL, serve_work, rt) == 0;
    for (long served = 0; requests == 0 || served < requests; served++) {
        int fd = accept(lfd, NULL, NULL);
        if (fd < 0) {
            if (errno == EINTR)
                continue;
            perror("metrics_http: accept");
            break;
        }
        serve_one(fd, rt);
        close(fd);
    }
    close(lfd);
    atomic_store(&stopping, 1);
    if (working)
        pthread_join(worker, NULL);
    nxr_runtime_destroy(rt);
    return 0;
}
