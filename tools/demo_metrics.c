/* `nxr demo --metrics-port`: see demo_metrics.h. */
#include "tools/demo_metrics.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "examples/metrics_server.h"

static int page(void *arg, char **out, size_t *len)
{
    struct nxr_tool_metrics *m = arg;
    int rc = 0;
    pthread_mutex_lock(&m->lock);
    if (m->rt != NULL) {
        rc = metrics_runtime_page(m->rt, out, len);
    } else {
        const char *text = m->last != NULL ? m->last : "# nxr demo: the runtime is not made yet\n";
        *len = m->last != NULL ? m->last_len : strlen(text);
        *out = malloc(*len + 1);
        if (*out == NULL)
            rc = -ENOMEM;
        else
            memcpy(*out, text, *len + 1);
    }
    pthread_mutex_unlock(&m->lock);
    return rc;
}

int nxr_tool_metrics_start(struct nxr_tool_metrics *m, unsigned port, long hold)
{
    memset(m, 0, sizeof *m);
    m->hold = hold;
    pthread_mutex_init(&m->lock, NULL);
    unsigned bound = 0;
    int rc = metrics_server_start(port, page, m, &m->srv, &bound);
    if (rc != 0) {
        fprintf(stderr, "nxr demo: --metrics-port %u: %s\n", port, strerror(-rc));
        pthread_mutex_destroy(&m->lock);
        return 1;
    }
    fprintf(stderr, "nxr demo: metrics on http://127.0.0.1:%u/metrics\n", bound);
    return 0;
}

void nxr_tool_metrics_hook(void *arg, nxr_runtime_t *rt, bool ending)
{
    struct nxr_tool_metrics *m = arg;
    pthread_mutex_lock(&m->lock);
    if (ending) {
        /* The last counters, while the runtime still answers. */
        free(m->last);
        if (metrics_runtime_page(rt, &m->last, &m->last_len) != 0)
            m->last = NULL;
        m->rt = NULL;
    } else {
        m->rt = rt;
    }
    pthread_mutex_unlock(&m->lock);
}

void nxr_tool_metrics_finish(struct nxr_tool_metrics *m)
{
    if (m->srv == NULL)
        return;
    if (m->hold > 0)
        metrics_server_wait(m->srv, m->hold);
    metrics_server_stop(m->srv);
    m->srv = NULL;
    free(m->last);
    pthread_mutex_destroy(&m->lock);
}
