/* Serving the llama decoder (see llama_serve.h). */
#include "service/llama_serve.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "service/load.h"
#include "service/weights.h"

/* xorshift64*, the stream's only randomness: the same on every machine. */
static uint64_t next_random(uint64_t *state)
{
    uint64_t x = *state;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    *state = x;
    return x * 0x2545f4914f6cdd1dull;
}

static size_t uniform_in(uint64_t *state, size_t lo, size_t hi)
{
    return lo + (size_t)(next_random(state) % (hi - lo + 1));
}

void svc_llama_request(const struct svc_llama_stream *st, size_t i, size_t vocab,
                       size_t *prompt_len, size_t *gen, int *prompt)
{
    uint64_t state = (st->seed + 1) * 0x9e3779b97f4a7c15ull ^ (i + 1) * 0xbf58476d1ce4e5b9ull;
    state |= 1;
    *prompt_len = uniform_in(&state, st->prompt_min, st->prompt_max);
    *gen = uniform_in(&state, st->gen_min, st->gen_max);
    for (size_t j = 0; prompt != NULL && j < *prompt_len; j++)
        prompt[j] = (int)(next_random(&state) % vocab);
}

struct server;

/* A client's sequence in flight. */
struct slot {
    struct svc_llama_seq seq;
    int *prompt;
    size_t index; /* in the run: stream sequence first + index */
    size_t domain, blocks;
    long long submit_ns, last_ns;
};

struct domain {
    struct server *srv;
    size_t index;
    pthread_t thread;
    bool started;
    pthread_cond_t wake;
    struct svc_llama_seq *inbox_head, *inbox_tail;
    size_t capacity;  /* the pool's blocks */
    size_t committed; /* blocks of the sequences sent here and not finished */
    size_t routed;    /* those sequences */
    struct svc_llama_serve_domain stats;
    long long last_step_ns; /* when its previous step ended (under the lock) */
};

struct server {
    nxr_runtime_t *rt;
    const struct svc_llama_weights *w;
    const struct svc_llama_serve_config *c;
    int *tokens;
    struct svc_llama_serve_result *res;
    pthread_mutex_t lock; /* everything below, and every domain's inbox and counters */
    struct domain dom[SVC_LLAMA_SERVE_MAX_DOMAINS];
    size_t domains;
    struct slot *slots;
    size_t next, done;
    size_t ready;             /* serving threads with their engine made */
    pthread_cond_t all_ready; /* signalled by the last of them */
    bool stop;
    long long start_ns, end_ns;
    size_t step_cap; /* res->step_*'s room: a step has at least one row */
    int rc;
    char *err;
    size_t errsz;
};

static size_t blocks_of(const struct server *srv, size_t positions)
{
    const size_t bt = srv->c->batch.block_tokens;
    return (positions + bt - 1) / bt;
}

/* Starts the run's next sequence in slot sl and sends it to a domain.
 * Called with the lock held. */
static void route_next(struct server *srv, struct slot *sl)
{
    const struct svc_llama_shape *s = &srv->w->model->shape;
    const size_t j = srv->next++;
    size_t plen, gen;
    svc_llama_request(&srv->c->stream, srv->c->first + j, s->vocab, &plen, &gen, sl->prompt);
    memset(&sl->seq, 0, sizeof sl->seq);
    sl->seq.prompt = sl->prompt;
    sl->seq.prompt_len = plen;
    sl->seq.gen = gen;
    sl->seq.out = srv->tokens + j * srv->c->stream.gen_max;
    sl->seq.user = sl;
    sl->index = j;
    sl->blocks = blocks_of(srv, plen + gen - 1);
    /* Most free cache; ties: fewest sequences; then the lowest index. */
    size_t best = 0;
    long long best_free = 0;
    for (size_t d = 0; d < srv->domains; d++) {
        const struct domain *D = &srv->dom[d];
        const long long free_blocks = (long long)D->capacity - (long long)D->committed;
        if (d == 0 || free_blocks > best_free ||
            (free_blocks == best_free && D->routed < srv->dom[best].routed)) {
            best = d;
            best_free = free_blocks;
        }
    }
    struct domain *D = &srv->dom[best];
    sl->domain = best;
    D->committed += sl->blocks;
    D->routed++;
    if (D->inbox_tail != NULL)
        D->inbox_tail->next = &sl->seq;
    else
        D->inbox_head = &sl->seq;
    D->inbox_tail = &sl->seq;
    sl->submit_ns = svc_now_ns();
    pthread_cond_signal(&D->wake);
}

static void stop_all(struct server *srv)
{
    srv->stop = true;
    pthread_cond_signal(&srv->all_ready);
    for (size_t d = 0; d < srv->domains; d++)
        pthread_cond_signal(&srv->dom[d].wake);
}

static void fail(struct server *srv, int rc, const char *what, size_t domain)
{
    pthread_mutex_lock(&srv->lock);
    if (srv->rc == 0) {
        srv->rc = rc;
        snprintf(srv->err, srv->errsz, "domain %zu: %s: %s", domain, what, nxr_strerror(rc));
    }
    stop_all(srv);
    pthread_mutex_unlock(&srv->lock);
}

/* The engine's token callback, on the domain's serving thread. */
static void on_token(void *arg, struct svc_llama_seq *s, int token)
{
    (void)token;
    struct domain *D = arg;
    struct server *srv = D->srv;
    struct slot *sl = s->user;
    const long long now = svc_now_ns();
    pthread_mutex_lock(&srv->lock);
    struct svc_llama_serve_result *r = srv->res;
    if (s->made == 1)
        r->ttft_ms[sl->index] = (double)(now - sl->submit_ns) / 1e6;
    else
        r->itl_ms[r->itl_count++] = (double)(now - sl->last_ns) / 1e6;
    sl->last_ns = now;
    D->stats.tokens++;
    if (s->made == s->gen) {
        D->committed -= sl->blocks;
        D->routed--;
        D->stats.sequences++;
        if (++srv->done == srv->c->count) {
            srv->end_ns = now;
            stop_all(srv);
        } else if (srv->next < srv->c->count) {
            route_next(srv, sl); /* the client asks again at once */
        }
    }
    pthread_mutex_unlock(&srv->lock);
}

/* Where the KV pool's pages are: the service's one page check. */
static double kv_on_node(const struct svc_kv_blocks *kv)
{
    struct svc_replica r = {
        .domain = kv->domain, .w = kv->base, .bytes = kv->count * kv->block_floats * sizeof(float)};
    svc_replica_verify(&r);
    return r.on_node;
}

/* The span of --span: every domain of the runtime, driven by this serving
 * thread only; the shards must have been made over the same members. */
static int open_span(struct server *srv, nxr_ctx_t **span)
{
    struct nxr_span_opts so;
    nxr_span_opts_init(&so);
    so.every = true;
    int rc = nxr_span_create(srv->rt, &so, span);
    if (rc != 0)
        return rc;
    const size_t members = nxr_span_domain_count(*span);
    bool same = members == srv->c->span->members;
    for (size_t i = 0; same && i < members; i++)
        same = nxr_span_domain_at(*span, i) == svc_llama_shards_domain(srv->c->span, i);
    if (!same) {
        nxr_ctx_destroy(*span);
        *span = NULL;
        return -EINVAL;
    }
    return 0;
}

static void *serving_thread(void *arg)
{
    struct domain *D = arg;
    struct server *srv = D->srv;
    nxr_ctx_t *ctx = NULL, *span = NULL;
    struct svc_llama_batch *b = NULL;
    nxr_domain_t *d = srv->w->side[D->index].replica.domain;
    int rc = nxr_ctx_create(srv->rt, nxr_domain_id(d), &ctx);
    if (rc == 0 && srv->c->span != NULL)
        rc = open_span(srv, &span);
    if (rc != 0) {
        fail(srv, rc, span == NULL && ctx != NULL ? "span" : "context", D->index);
        nxr_ctx_destroy(ctx);
        return NULL;
    }
    struct svc_llama_batch_opts o = srv->c->batch;
    o.on_token = on_token;
    o.arg = D;
    o.span = span;
    o.shards = srv->c->span;
    if ((rc = svc_llama_batch_create(srv->w, D->index, ctx, &o, &b)) != 0) {
        fail(srv, rc, "engine", D->index);
        nxr_ctx_destroy(span);
        nxr_ctx_destroy(ctx);
        return NULL;
    }
    /* The clock starts once every engine is made (the first sequences are
     * routed then): TTFT is serving time, not start-up. */
    pthread_mutex_lock(&srv->lock);
    if (++srv->ready == srv->domains)
        pthread_cond_signal(&srv->all_ready);
    pthread_mutex_unlock(&srv->lock);
    for (;;) {
        pthread_mutex_lock(&srv->lock);
        while (!srv->stop && D->inbox_head == NULL && svc_llama_batch_idle(b))
            pthread_cond_wait(&D->wake, &srv->lock);
        if (srv->stop) {
            pthread_mutex_unlock(&srv->lock);
            break;
        }
        while (D->inbox_head != NULL && rc == 0) {
            struct svc_llama_seq *s = D->inbox_head;
            D->inbox_head = s->next;
            if (D->inbox_head == NULL)
                D->inbox_tail = NULL;
            rc = svc_llama_batch_submit(b, s);
        }
        pthread_mutex_unlock(&srv->lock);
        if (rc != 0) {
            fail(srv, rc, "submit", D->index);
            break;
        }
        const size_t before = svc_llama_batch_active(b);
        struct svc_llama_step st;
        if ((rc = svc_llama_batch_step(b, &st)) != 0) {
            fail(srv, rc, "step", D->index);
            break;
        }
        if (st.rows > 0) {
            const long long now = svc_now_ns();
            pthread_mutex_lock(&srv->lock);
            D->stats.steps++;
            D->stats.batch_sum += before + st.admitted;
            D->stats.rows += st.rows;
            struct svc_llama_serve_result *r = srv->res;
            if (st.decode_rows > 0 && r->step_count < srv->step_cap) {
                const long long since =
                    D->last_step_ns > srv->start_ns ? D->last_step_ns : srv->start_ns;
                r->step_s[r->step_count] = (double)(now - srv->start_ns) / 1e9;
                r->step_tokens_per_s[r->step_count] =
                    now > since ? (double)st.decode_rows * 1e9 / (double)(now - since) : 0;
                r->step_tokens[r->step_count] = (unsigned)st.decode_rows;
                r->step_domain[r->step_count++] = (unsigned)D->index;
            }
            D->last_step_ns = now;
            pthread_mutex_unlock(&srv->lock);
        }
    }
    D->stats.kv_on_node = kv_on_node(svc_llama_batch_cache(b));
    svc_llama_batch_destroy(b);
    nxr_ctx_destroy(span);
    nxr_ctx_destroy(ctx);
    return NULL;
}

static int check(const struct svc_llama_weights *w, const struct svc_llama_serve_config *c,
                 char *err, size_t errsz)
{
    const struct svc_llama_shape *s = &w->model->shape;
    const struct svc_llama_stream *st = &c->stream;
    if (w->domains == 0 || w->domains > SVC_LLAMA_SERVE_MAX_DOMAINS) {
        snprintf(err, errsz, "%zu domains (1..%d)", w->domains, SVC_LLAMA_SERVE_MAX_DOMAINS);
        return -EINVAL;
    }
    if (c->count == 0 || c->clients == 0 || st->prompt_min == 0 || st->gen_min == 0 ||
        st->prompt_min > st->prompt_max || st->gen_min > st->gen_max) {
        snprintf(err, errsz, "an empty range or count");
        return -EINVAL;
    }
    if (st->prompt_max + st->gen_max - 1 > s->seq) {
        snprintf(err, errsz,
                 "--prompt and --gen: %zu + %zu tokens exceed the model's context of %zu",
                 st->prompt_max, st->gen_max, s->seq);
        return -EINVAL;
    }
    const size_t block_bytes =
        s->layers * 2 * c->batch.block_tokens * svc_llama_kv_dim(s) * sizeof(float);
    const size_t bt = c->batch.block_tokens;
    const size_t need = (st->prompt_max + st->gen_max - 1 + bt - 1) / bt;
    if (c->batch.kv_bytes / block_bytes < need) {
        snprintf(err, errsz,
                 "--kv-mib: %zu MiB holds %zu blocks of %zu positions; the longest sequence "
                 "needs %zu",
                 c->batch.kv_bytes >> 20, c->batch.kv_bytes / block_bytes, bt, need);
        return -EINVAL;
    }
    return 0;
}

void svc_llama_serve_result_free(struct svc_llama_serve_result *r)
{
    free(r->ttft_ms);
    free(r->itl_ms);
    free(r->step_s);
    free(r->step_tokens_per_s);
    free(r->step_domain);
    free(r->step_tokens);
    memset(r, 0, sizeof *r);
}

int svc_llama_serve(nxr_runtime_t *rt, const struct svc_llama_weights *w,
                    const struct svc_llama_serve_config *c, int *tokens,
                    struct svc_llama_serve_result *out, char *err, size_t errsz)
{
    memset(out, 0, sizeof *out);
    int rc = check(w, c, err, errsz);
    if (rc != 0)
        return rc;
    const struct svc_llama_shape *s = &w->model->shape;
    struct server *srv = calloc(1, sizeof *srv);
    const size_t clients = c->clients < c->count ? c->clients : c->count;
    out->ttft_ms = calloc(c->count, sizeof(double));
    out->itl_ms = calloc(c->count * c->stream.gen_max, sizeof(double));
    const size_t step_cap = c->count * (c->stream.prompt_max + c->stream.gen_max);
    out->step_s = calloc(step_cap, sizeof(double));
    out->step_tokens_per_s = calloc(step_cap, sizeof(double));
    out->step_domain = calloc(step_cap, sizeof(unsigned));
    out->step_tokens = calloc(step_cap, sizeof(unsigned));
    if (srv == NULL || out->ttft_ms == NULL || out->itl_ms == NULL || out->step_s == NULL ||
        out->step_tokens_per_s == NULL || out->step_domain == NULL || out->step_tokens == NULL ||
        (srv->slots = calloc(clients, sizeof *srv->slots)) == NULL) {
        rc = -ENOMEM;
        goto out_free;
    }
    for (size_t i = 0; i < clients; i++)
        if ((srv->slots[i].prompt = malloc(c->stream.prompt_max * sizeof(int))) == NULL) {
            rc = -ENOMEM;
            goto out_free;
        }
    srv->rt = rt, srv->w = w, srv->c = c, srv->tokens = tokens, srv->res = out;
    srv->err = err, srv->errsz = errsz;
    srv->step_cap = step_cap;
    srv->domains = c->span != NULL ? 1 : w->domains;
    pthread_mutex_init(&srv->lock, NULL);
    const size_t block_bytes =
        s->layers * 2 * c->batch.block_tokens * svc_llama_kv_dim(s) * sizeof(float);
    for (size_t d = 0; d < srv->domains; d++) {
        struct domain *D = &srv->dom[d];
        D->srv = srv;
        D->index = d;
        D->capacity = c->batch.kv_bytes / block_bytes;
        pthread_cond_init(&D->wake, NULL);
    }
    pthread_cond_init(&srv->all_ready, NULL);
    for (size_t d = 0; d < srv->domains; d++) {
        int prc = pthread_create(&srv->dom[d].thread, NULL, serving_thread, &srv->dom[d]);
        if (prc != 0) {
            fail(srv, -prc, "thread", d);
            break;
        }
        srv->dom[d].started = true;
    }
    pthread_mutex_lock(&srv->lock);
    while (!srv->stop && srv->ready < srv->domains)
        pthread_cond_wait(&srv->all_ready, &srv->lock);
    if (!srv->stop) {
        srv->start_ns = svc_now_ns();
        for (size_t i = 0; i < clients; i++)
            route_next(srv, &srv->slots[i]);
    }
    pthread_mutex_unlock(&srv->lock);
    for (size_t d = 0; d < srv->domains; d++)
        if (srv->dom[d].started)
            pthread_join(srv->dom[d].thread, NULL);
    rc = srv->rc;
    if (rc == 0) {
        out->domains = srv->domains;
        out->sequences = srv->done;
        out->wall_s = (double)(srv->end_ns - srv->start_ns) / 1e9;
        for (size_t d = 0; d < srv->domains; d++) {
            out->domain[d] = srv->dom[d].stats;
            out->tokens += srv->dom[d].stats.tokens;
            out->steps += srv->dom[d].stats.steps;
            out->batch_sum += srv->dom[d].stats.batch_sum;
            out->rows += srv->dom[d].stats.rows;
        }
    }
    for (size_t d = 0; d < srv->domains; d++)
        pthread_cond_destroy(&srv->dom[d].wake);
    pthread_cond_destroy(&srv->all_ready);
    pthread_mutex_destroy(&srv->lock);
out_free:
    for (size_t i = 0; srv != NULL && srv->slots != NULL && i < clients; i++)
        free(srv->slots[i].prompt);
    if (srv != NULL)
        free(srv->slots);
    free(srv);
    if (rc != 0) {
        svc_llama_serve_result_free(out);
        if (rc == -ENOMEM)
            snprintf(err, errsz, "out of memory");
    }
    return rc;
}
