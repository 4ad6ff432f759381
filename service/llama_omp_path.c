/* `nxr demo`'s OpenMP peer for the language model (see llama_omp_path.h). */
#include "service/llama_omp_path.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "service/llama_omp.h"
#include "service/load.h"

struct timing {
    struct svc_llama_serve_result *r;
    size_t index;
    long long submit_ns, last_ns;
};

static void on_token(void *arg, size_t made)
{
    struct timing *t = arg;
    const long long now = svc_now_ns();
    if (made == 1)
        t->r->ttft_ms[t->index] = (double)(now - t->submit_ns) / 1e6;
    else
        t->r->itl_ms[t->r->itl_count++] = (double)(now - t->last_ns) / 1e6;
    t->last_ns = now;
}

int svc_llama_omp_serve(const struct svc_llama *m, int threads,
                        const struct svc_llama_serve_config *c, int *tokens,
                        struct svc_llama_serve_result *out)
{
    memset(out, 0, sizeof *out);
    const struct svc_llama_stream *st = &c->stream;
    if (c->count == 0 || c->clients == 0 || st->prompt_max + st->gen_max - 1 > m->shape.seq)
        return -EINVAL;
    struct svc_llama_omp *e = NULL;
    int *prompt = malloc(st->prompt_max * sizeof(int));
    long long *finish = calloc(c->count, sizeof *finish);
    out->ttft_ms = calloc(c->count, sizeof(double));
    out->itl_ms = calloc(c->count * st->gen_max, sizeof(double));
    int rc = prompt == NULL || finish == NULL || out->ttft_ms == NULL || out->itl_ms == NULL
                 ? -ENOMEM
                 : svc_llama_omp_create(m, threads, &e);
    if (rc != 0) {
        svc_llama_serve_result_free(out);
        goto out_free;
    }
    const long long start = svc_now_ns();
    for (size_t j = 0; j < c->count; j++) {
        size_t plen, gen;
        svc_llama_request(st, c->first + j, m->shape.vocab, &plen, &gen, prompt);
        /* Closed loop: this sequence's client sent it when its previous one
         * (j - clients) finished. */
        struct timing t = {
            .r = out, .index = j, .submit_ns = j < c->clients ? start : finish[j - c->clients]};
        svc_llama_omp_generate(e, prompt, plen, gen, tokens + j * st->gen_max, on_token, &t);
        finish[j] = t.last_ns;
        out->tokens += gen;
        out->steps += plen - 1 + gen;
    }
    out->sequences = c->count;
    out->wall_s = (double)(finish[c->count - 1] - start) / 1e9;
    out->batch_sum = out->steps; /* one sequence a step */
    out->domains = 1;
    out->domain[0].sequences = c->count;
    out->domain[0].tokens = out->tokens;
    out->domain[0].steps = out->steps;
    out->domain[0].batch_sum = out->steps;
    out->domain[0].kv_on_node = -1;
    svc_llama_omp_destroy(e);
out_free:
    free(prompt);
    free(finish);
    return rc;
}
