/* The /metrics server of metrics_server.h. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* nxr's headers use cpu_set_t */
#endif
#include "metrics_server.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

struct metrics_server {
    int fd;
    metrics_page_fn page;
    void *arg;
    pthread_t thread;
    atomic_bool stop;
    pthread_mutex_t lock;
    pthread_cond_t answered_cond;
    long answered; /* under lock */
    bool done;     /* under lock: the thread has left its loop */
};

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
static void serve_one(struct metrics_server *s, int fd)
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
    char *page = NULL;
    size_t len = 0;
    int rc = s->page(s->arg, &page, &len);
    if (rc != 0) {
        char msg[256];
        int n = snprintf(msg, sizeof(msg), "the metrics page: %s\n", nxr_strerror(rc));
        answer(fd, "500 Internal Server Error", "text/plain", msg, (size_t)n);
    } else {
        answer(fd, "200 OK", "text/plain; version=0.0.4", page, len);
    }
    free(page);
}

static void *loop(void *p)
{
    struct metrics_server *s = p;
    while (!atomic_load(&s->stop)) {
        struct pollfd pfd = {.fd = s->fd, .events = POLLIN};
        if (poll(&pfd, 1, 200) <= 0) /* 200 ms at most between looks at stop */
            continue;
        int fd = accept(s->fd, NULL, NULL);
        if (fd < 0)
            continue;
        struct timeval tv = {.tv_sec = 2};
        (void)setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
        serve_one(s, fd);
        close(fd);
        pthread_mutex_lock(&s->lock);
        s->answered++;
        pthread_cond_broadcast(&s->answered_cond);
        pthread_mutex_unlock(&s->lock);
    }
    pthread_mutex_lock(&s->lock);
    s->done = true;
    pthread_cond_broadcast(&s->answered_cond);
    pthread_mutex_unlock(&s->lock);
    return NULL;
}

int metrics_server_start(unsigned port, metrics_page_fn page, void *arg,
                         struct metrics_server **out, unsigned *bound_port)
{
    *out = NULL;
    if (port > 65535 || page == NULL)
        return -EINVAL;
    struct metrics_server *s = calloc(1, sizeof *s);
    if (s == NULL)
        return -ENOMEM;
    s->page = page;
    s->arg = arg;
    s->fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in addr = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    int one = 1, rc = 0;
    socklen_t alen = sizeof(addr);
    if (s->fd < 0 || setsockopt(s->fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) != 0 ||
        bind(s->fd, (struct sockaddr *)&addr, sizeof(addr)) != 0 || listen(s->fd, 16) != 0 ||
        getsockname(s->fd, (struct sockaddr *)&addr, &alen) != 0)
        rc = -errno;
    pthread_mutex_init(&s->lock, NULL);
    pthread_cond_init(&s->answered_cond, NULL);
    if (rc == 0)
        rc = -pthread_create(&s->thread, NULL, loop, s);
    if (rc != 0) {
        if (s->fd >= 0)
            close(s->fd);
        pthread_cond_destroy(&s->answered_cond);
        pthread_mutex_destroy(&s->lock);
        free(s);
        return rc;
    }
    if (bound_port != NULL)
        *bound_port = ntohs(addr.sin_port);
    *out = s;
    return 0;
}

long metrics_server_wait(struct metrics_server *s, long n)
{
    pthread_mutex_lock(&s->lock);
    while (s->answered < n && !s->done)
        pthread_cond_wait(&s->answered_cond, &s->lock);
    long answered = s->answered;
    pthread_mutex_unlock(&s->lock);
    return answered;
}

void metrics_server_stop(struct metrics_server *s)
{
    if (s == NULL)
        return;
    atomic_store(&s->stop, true);
    pthread_join(s->thread, NULL);
    close(s->fd);
    pthread_cond_destroy(&s->answered_cond);
    pthread_mutex_destroy(&s->lock);
    free(s);
}

int metrics_runtime_page(const nxr_runtime_t *rt, char **page, size_t *len)
{
    *page = NULL;
    int rc = nxr_runtime_metrics(rt, NULL, 0, len); /* the length, then the page */
    for (int tries = 0; rc == -ENOSPC && tries < 4; tries++) {
        free(*page);
        if ((*page = malloc(*len + 1)) == NULL)
            return -ENOMEM;
        rc = nxr_runtime_metrics(rt, *page, *len + 1, len); /* it may have grown */
    }
    if (rc != 0) {
        free(*page);
        *page = NULL;
    }
    return rc;
}
