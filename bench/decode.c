/*
 * bench/decode: a llama-architecture decoder (RMSNorm, Q/K/V/O projections,
 * RoPE, causal attention over a KV cache with grouped-query attention,
 * SwiGLU FFN, classifier; random f32 weights from a seed) generating tokens
 * greedily, one decode step at a time, from a fixed prompt, written twice:
 * with nxr as the docs tell a user to (decode_nxr.c) and as a plain OpenMP
 * row-loop engine (service/llama_omp.c). The nxr engine runs twice: one call per
 * operation, and each token as one nxr_step (runtime/nxr_step.h). All must
 * produce the same tokens.
 *
 * Decode is memory-bound: a step reads every weight once, so its limit is
 * the step's weight bytes over the machine's streaming-read bandwidth. The
 * read is measured in the same run, on nxr's threads, over the very bytes
 * the steps read: the packed copies in the run's format, on their pages
 * (bench/read_limit.h: AVX2 loads, pieces any participant takes, the
 * threads awake first, the best of several reads per round and the best
 * round, so that it is an upper bound and the fraction of the limit stays
 * at or below about 1). Rounds alternate the engines (the order too, round
 * by round; nxr's two back to back, they share their threads) with the
 * read after them; the engines' figures are medians over the rounds.
 * tok/s counts decode steps (the prompt's included: each reads all the
 * weights); weight GB/s is a step's weight bytes times steps per second;
 * the fraction of the limit is nxr's weight GB/s over the read's. The
 * OpenMP engine's limit is its own: the same best read of its f32 weights
 * on its own threads (omp_read_gbs; nxr's workers are pinned, OpenMP's
 * are not, and on a machine shared with other tenants the two can differ).
 *
 *   bazel run //bench:decode -- [--shape 15m|110m] [--dim D --hidden H
 *       --layers L --heads N --kv-heads K --vocab V --seq S] [--tokens N]
 *       [--rounds R] [--seed S] [--weights f32|bf16|int8] [--json] [--short]
 *
 * --shape: 15m (dim 288, hidden 768, 6 layers, 6 heads, vocab 32000, seq
 * 256; the default) or 110m (768, 2048, 12, 12, 32000, 1024); the other
 * flags then change one dimension each (the shape is then "custom").
 * --tokens: generated after the prompt (default 64). --weights: the packed
 * format of nxr's engines (f32, bf16 or int8: runtime/nxr_weights.h); with
 * bf16 or int8 nxr's engine on f32 weights runs in the same rounds too
 * (vs_f32), and how many of the first tokens are f32's is counted.
 * --short (CI's bench stage and tests/bench): a tiny shape (dim 64, 2
 * layers, 4 heads over 2 KV heads, vocab 512), 8 tokens, one round.
 * With another format, nxr on f32 weights is held against a read of its
 * own f32 copies (nxr_f32 {tok_s, read_gbs, fraction_of_limit}).
 * --json: one object {shape, dims, weights, threads, tokens, steps, rounds,
 * step_weight_bytes, nxr {tok_s, weight_gbs, step_us {projections,
 * attention, rest, gaps}}, nxr_step {tok_s, weight_gbs, fraction_of_limit,
 * vs_omp}, omp {tok_s, weight_gbs}, read_gbs, omp_read_gbs,
 * fraction_of_limit, omp_fraction_of_limit (over omp_read_gbs),
 * nxr_vs_omp, tokens_match, load}. Exit status 1 when the engines' tokens differ.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "service/llama_model.h"
#include "bench/decode_nxr.h"
#include "bench/decode_omp.h"
#include "service/llama_omp.h"
#include "bench/read_limit.h"
#include "bench/timing.h"
#include "runtime/nxr.h"

#define MAX_ROUNDS 101

struct options {
    struct svc_llama_shape shape;
    size_t tokens;
    int rounds;
    uint64_t seed;
    bool json;
    enum nxr_weights_format format;
    const char *format_name;
};

static int usage(void)
{
    fprintf(stderr, "usage: decode [--shape 15m|110m] [--dim D] [--hidden H] [--layers L] "
                    "[--heads N] [--kv-heads K] [--vocab V] [--seq S] [--tokens N] [--rounds R] "
                    "[--seed S] [--weights f32|bf16|int8] [--json] [--short]\n");
    return 2;
}

/* Returns -1 to go on, else the exit status. */
static int parse(int argc, char **argv, struct options *o)
{
    *o = (struct options){
        .tokens = 64, .rounds = 5, .seed = 1, .format = NXR_WEIGHTS_F32, .format_name = "f32"};
    svc_llama_shape_named("15m", &o->shape);
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(a, "--json") == 0) {
            o->json = true;
            continue;
        }
        if (strcmp(a, "--short") == 0) {
            svc_llama_shape_named("short", &o->shape);
            o->tokens = 8;
            o->rounds = 1;
            continue;
        }
        if (v == NULL)
            return usage();
        i++;
        size_t *dim = strcmp(a, "--dim") == 0        ? &o->shape.dim
                      : strcmp(a, "--hidden") == 0   ? &o->shape.hidden
                      : strcmp(a, "--layers") == 0   ? &o->shape.layers
                      : strcmp(a, "--heads") == 0    ? &o->shape.heads
                      : strcmp(a, "--kv-heads") == 0 ? &o->shape.kv_heads
                      : strcmp(a, "--vocab") == 0    ? &o->shape.vocab
                      : strcmp(a, "--seq") == 0      ? &o->shape.seq
                                                     : NULL;
        if (dim != NULL) {
            *dim = (size_t)strtoull(v, NULL, 10);
            o->shape.name = "custom";
        } else if (strcmp(a, "--shape") == 0) {
            if (svc_llama_shape_named(v, &o->shape) != 0) {
                fprintf(stderr, "decode: --shape %s: not a shape (15m, 110m, short)\n", v);
                return 2;
            }
        } else if (strcmp(a, "--tokens") == 0) {
            o->tokens = (size_t)strtoull(v, NULL, 10);
        } else if (strcmp(a, "--rounds") == 0) {
            o->rounds = atoi(v);
        } else if (strcmp(a, "--seed") == 0) {
            o->seed = strtoull(v, NULL, 10);
        } else if (strcmp(a, "--weights") == 0) {
            if (strcmp(v, "f32") == 0)
                o->format = NXR_WEIGHTS_F32;
            else if (strcmp(v, "bf16") == 0)
                o->format = NXR_WEIGHTS_BF16;
            else if (strcmp(v, "int8") == 0)
                o->format = NXR_WEIGHTS_Q8_BLOCK32;
            else {
                fprintf(stderr, "decode: --weights %s: not a format (f32, bf16, int8)\n", v);
                return 2;
            }
            o->format_name = v;
        } else {
            return usage();
        }
    }
    const char *problem = svc_llama_shape_problem(&o->shape);
    if (problem != NULL) {
        fprintf(stderr, "decode: %s\n", problem);
        return 2;
    }
    if (o->tokens < 1 || SVC_LLAMA_PROMPT_LEN - 1 + o->tokens > o->shape.seq) {
        fprintf(stderr, "decode: --tokens must be 1..%zu (the prompt is %d tokens, --seq %zu)\n",
                o->shape.seq + 1 - SVC_LLAMA_PROMPT_LEN, SVC_LLAMA_PROMPT_LEN, o->shape.seq);
        return 2;
    }
    if (o->rounds < 1 || o->rounds > MAX_ROUNDS) {
        fprintf(stderr, "decode: --rounds must be 1..%d\n", MAX_ROUNDS);
        return 2;
    }
    return -1;
}

static void die(const char *what, int rc)
{
    fprintf(stderr, "decode: %s: %s (%s)\n", what, nxr_strerror(rc), nxr_last_error());
    exit(1);
}

/* ---- the limit: a streaming read of the step's weight bytes ----------------------------- */

/* Reads per round; each round keeps the best (bench/read_limit.h). */
#define LIMIT_READS 5

static volatile float read_sink;

/* The best of LIMIT_READS reads of m's f32 weights on the OpenMP engine's
 * threads (decode_omp_read), after two untimed ones: its own limit, as
 * read_limit_best is nxr's. */
static double omp_read_best(const struct svc_llama *m, int threads)
{
    double best = 0;
    for (int i = -2; i < LIMIT_READS; i++) {
        const double t0 = bench_now();
        read_sink = decode_omp_read(m->streamed, m->streamed_floats, threads);
        const double t = bench_now() - t0;
        if (i >= 0 && (best == 0 || t < best))
            best = t;
    }
    return best;
}

/* The least of v[0, n). */
static double least(const double *v, size_t n)
{
    double m = v[0];
    for (size_t i = 1; i < n; i++)
        m = v[i] < m ? v[i] : m;
    return m;
}

/* ---- the rounds -------------------------------------------------------------------------- */

/* Between the engines: long enough for the other family's threads to stop
 * spinning (bench/kernels_util.h's settle, nxr's and libgomp's). */
static void settle(void)
{
    nanosleep(&(struct timespec){.tv_nsec = 20 * 1000 * 1000}, NULL);
}

struct run {
    struct decode_nxr *nxr;
    struct decode_nxr *f32; /* the same engine on f32 weights (another format's run), or NULL */
    struct svc_llama_omp *omp;
    int prompt[SVC_LLAMA_PROMPT_LEN];
    size_t tokens;
};

static double time_nxr(struct run *r, int *out, struct decode_nxr_times *tm)
{
    const double t0 = bench_now();
    int rc = decode_nxr_generate(r->nxr, r->prompt, SVC_LLAMA_PROMPT_LEN, r->tokens, out, tm);
    const double t = bench_now() - t0;
    if (rc != 0)
        die("nxr decode", rc);
    return t;
}

static double time_f32(struct run *r, int *out)
{
    const double t0 = bench_now();
    int rc = decode_nxr_generate(r->f32, r->prompt, SVC_LLAMA_PROMPT_LEN, r->tokens, out, NULL);
    const double t = bench_now() - t0;
    if (rc != 0)
        die("nxr decode (f32 weights)", rc);
    return t;
}

static double time_step(struct run *r, int *out)
{
    const double t0 = bench_now();
    int rc = decode_nxr_generate_step(r->nxr, r->prompt, SVC_LLAMA_PROMPT_LEN, r->tokens, out);
    const double t = bench_now() - t0;
    if (rc != 0)
        die("nxr decode (step)", rc);
    return t;
}

static double time_omp(struct run *r, int *out)
{
    const double t0 = bench_now();
    svc_llama_omp_generate(r->omp, r->prompt, SVC_LLAMA_PROMPT_LEN, r->tokens, out, NULL, NULL);
    return bench_now() - t0;
}

static void load_average(char *buf, size_t len)
{
    snprintf(buf, len, "?");
    FILE *f = fopen("/proc/loadavg", "r");
    if (f == NULL)
        return;
    if (fgets(buf, (int)len, f) == NULL)
        snprintf(buf, len, "?");
    fclose(f);
    /* The three averages only. */
    char *p = buf;
    for (int spaces = 0; *p != '\0'; p++)
        if (*p == ' ' && ++spaces == 3)
            break;
    *p = '\0';
}

int main(int argc, char **argv)
{
    struct options o;
    int status = parse(argc, argv, &o);
    if (status >= 0)
        return status;
    const struct svc_llama_shape *s = &o.shape;

    nxr_runtime_t *rt;
    nxr_ctx_t *ctx;
    int rc = nxr_runtime_create(NULL, &rt);
    if (rc != 0)
        die("runtime", rc);
    if ((rc = nxr_ctx_create(rt, nxr_domain_id(nxr_runtime_domain_at(rt, 0)), &ctx)) != 0)
        die("context", rc);
    const unsigned threads = nxr_ctx_budget(ctx);

    struct svc_llama model;
    if ((rc = svc_llama_create(s, o.seed, &model)) != 0)
        die("the model's weights", rc);
    struct run r = {.tokens = o.tokens};
    svc_llama_prompt(s, r.prompt);
    if ((rc = decode_nxr_create(&model, o.format, rt, ctx, &r.nxr)) != 0)
        die("packing the weights", rc);
    const bool other = o.format != NXR_WEIGHTS_F32;
    if (other && (rc = decode_nxr_create(&model, NXR_WEIGHTS_F32, rt, ctx, &r.f32)) != 0)
        die("packing the f32 weights", rc);
    if ((rc = svc_llama_omp_create(&model, (int)threads, &r.omp)) != 0)
        die("the OpenMP engine", rc);

    int *tok_nxr = calloc(o.tokens, sizeof(int)), *tok_omp = calloc(o.tokens, sizeof(int));
    int *again = calloc(o.tokens, sizeof(int)), *tok_step = calloc(o.tokens, sizeof(int));
    if (tok_nxr == NULL || tok_omp == NULL || again == NULL || tok_step == NULL)
        die("tokens", -ENOMEM);
    /* A first, untimed run of each: pages, caches, threads; and the tokens. */
    time_nxr(&r, tok_nxr, NULL);
    settle();
    time_omp(&r, tok_omp);
    settle();
    time_step(&r, tok_step);
    /* f32: nxr's engines and OpenMP make the same tokens. Another format:
     * nxr's two engines make the same tokens as each other; how many of the
     * first tokens are f32's (OpenMP's) is reported, not required. */
    bool match = memcmp(tok_step, tok_nxr, o.tokens * sizeof(int)) == 0 &&
                 (other || memcmp(tok_nxr, tok_omp, o.tokens * sizeof(int)) == 0);
    size_t same_as_f32 = 0;
    while (same_as_f32 < o.tokens && tok_nxr[same_as_f32] == tok_omp[same_as_f32])
        same_as_f32++;

    const size_t steps = SVC_LLAMA_PROMPT_LEN - 1 + o.tokens;
    /* What a step of the format streams, and the limit: a read of those
     * very bytes (the packed copies, in the format) on nxr's threads. */
    struct read_limit limit = {0}, f32_limit = {0};
    if ((rc = decode_nxr_read_limit(r.nxr, &limit)) != 0)
        die("the limit's bytes", rc);
    /* Another format: nxr on f32 weights has its own limit, a read of its
     * own packed copies on the same threads. */
    if (other && (rc = decode_nxr_read_limit(r.f32, &f32_limit)) != 0)
        die("the f32 limit's bytes", rc);
    const double bytes = (double)decode_nxr_step_bytes(r.nxr);
    /* The OpenMP engine's f32 bytes, and its own limit's. */
    const double read_bytes = (double)svc_llama_step_bytes(&model);
    double t_nxr[MAX_ROUNDS], t_omp[MAX_ROUNDS], t_step[MAX_ROUNDS], t_read[MAX_ROUNDS],
        t_omp_read[MAX_ROUNDS], t_f32[MAX_ROUNDS], t_f32_read[MAX_ROUNDS];
    struct decode_nxr_times tm = {0};
    for (int i = 0; i < o.rounds; i++) {
        settle();
        /* nxr's two engines share their threads: no settle between them. */
        if (other && i % 2 == 0) /* nxr's own engine on f32 weights, first or last */
            t_f32[i] = time_f32(&r, again);
        if (i % 2 == 0) {
            t_nxr[i] = time_nxr(&r, again, &tm);
            match = match && memcmp(again, tok_nxr, o.tokens * sizeof(int)) == 0;
            t_step[i] = time_step(&r, again);
            match = match && memcmp(again, tok_nxr, o.tokens * sizeof(int)) == 0;
            settle();
            t_omp[i] = time_omp(&r, again);
        } else {
            t_omp[i] = time_omp(&r, again);
            settle();
            t_step[i] = time_step(&r, again);
            match = match && memcmp(again, tok_nxr, o.tokens * sizeof(int)) == 0;
            t_nxr[i] = time_nxr(&r, again, &tm);
        }
        /* The run that went last gives the same tokens too. */
        match = match && (other || memcmp(again, tok_nxr, o.tokens * sizeof(int)) == 0);
        if (other && i % 2 == 1)
            t_f32[i] = time_f32(&r, again);
        settle();
        if ((t_read[i] = read_limit_best(ctx, &limit, LIMIT_READS)) < 0)
            die("the streaming read", (int)t_read[i]);
        if (other && (t_f32_read[i] = read_limit_best(ctx, &f32_limit, LIMIT_READS)) < 0)
            die("the streaming read (f32)", (int)t_f32_read[i]);
        settle();
        t_omp_read[i] = omp_read_best(&model, (int)threads);
    }
    const double tok_s_nxr = (double)steps / bench_median(t_nxr, (size_t)o.rounds);
    const double tok_s_omp = (double)steps / bench_median(t_omp, (size_t)o.rounds);
    const double tok_s_step = (double)steps / bench_median(t_step, (size_t)o.rounds);
    const double gbs_step = tok_s_step * bytes * 1e-9;
    const double gbs_nxr = tok_s_nxr * bytes * 1e-9, gbs_omp = tok_s_omp * read_bytes * 1e-9;
    /* The best read of all rounds: an upper bound (read_limit.h). */
    const double read_gbs = (double)limit.bytes / least(t_read, (size_t)o.rounds) * 1e-9;
    const double f32_read_gbs =
        other ? (double)f32_limit.bytes / least(t_f32_read, (size_t)o.rounds) * 1e-9 : 0;
    const double omp_read_gbs = read_bytes / least(t_omp_read, (size_t)o.rounds) * 1e-9;
    const double tok_s_f32 = other ? (double)steps / bench_median(t_f32, (size_t)o.rounds) : 0;
    const double per = 1e6 / (double)(tm.steps > 0 ? tm.steps : 1);
    const double gaps = tm.step - tm.projections - tm.attention - tm.rest;
    char load[64];
    load_average(load, sizeof load);

    if (o.json) {
        printf("{\"shape\":\"%s\",\"dims\":{\"dim\":%zu,\"hidden\":%zu,\"layers\":%zu,"
               "\"heads\":%zu,\"kv_heads\":%zu,\"vocab\":%zu,\"seq\":%zu},\"weights\":\"%s\","
               "\"threads\":%u,\"tokens\":%zu,\"steps\":%zu,\"rounds\":%d,"
               "\"step_weight_bytes\":%.0f,",
               s->name, s->dim, s->hidden, s->layers, s->heads, s->kv_heads, s->vocab, s->seq,
               o.format_name, threads, o.tokens, steps, o.rounds, bytes);
        if (other)
            printf("\"nxr_f32\":{\"tok_s\":%.2f,\"read_gbs\":%.3f,\"fraction_of_limit\":%.4f},"
                   "\"vs_f32\":%.4f,\"leading_tokens_as_f32\":%zu,",
                   tok_s_f32, f32_read_gbs,
                   tok_s_f32 * (double)f32_limit.bytes * 1e-9 / f32_read_gbs, tok_s_nxr / tok_s_f32,
                   same_as_f32);
        printf("\"nxr\":{\"tok_s\":%.2f,\"weight_gbs\":%.3f,\"step_us\":{\"projections\":%.2f,"
               "\"attention\":%.2f,\"rest\":%.2f,\"gaps\":%.2f}},",
               tok_s_nxr, gbs_nxr, tm.projections * per, tm.attention * per, tm.rest * per,
               gaps * per);
        printf("\"nxr_step\":{\"tok_s\":%.2f,\"weight_gbs\":%.3f,\"fraction_of_limit\":%.4f,"
               "\"vs_omp\":%.4f},",
               tok_s_step, gbs_step, gbs_step / read_gbs, tok_s_step / tok_s_omp);
        printf("\"omp\":{\"tok_s\":%.2f,\"weight_gbs\":%.3f},\"read_gbs\":%.3f,"
               "\"omp_read_gbs\":%.3f,"
               "\"fraction_of_limit\":%.4f,\"omp_fraction_of_limit\":%.4f,\"nxr_vs_omp\":%.4f,"
               "\"tokens_match\":%s,\"load\":\"%s\"}\n",
               tok_s_omp, gbs_omp, read_gbs, omp_read_gbs, gbs_nxr / read_gbs,
               gbs_omp / omp_read_gbs, tok_s_nxr / tok_s_omp, match ? "true" : "false", load);
    } else {
        printf("decode: shape %s (dim %zu, hidden %zu, %zu layers, %zu heads, %zu kv heads, "
               "vocab %zu, seq %zu), %s weights, %.1f MB per step\n",
               s->name, s->dim, s->hidden, s->layers, s->heads, s->kv_heads, s->vocab, s->seq,
               o.format_name, bytes * 1e-6);
        printf("%u threads; %zu tokens after a %d-token prompt (%zu steps); %d rounds, "
               "medians; load average %s\n",
               threads, o.tokens, SVC_LLAMA_PROMPT_LEN, steps, o.rounds, load);
        printf("%-28s %10s %12s %14s\n", "", "tok/s", "weight GB/s", "of the limit");
        printf("%-28s %10.1f %12.2f %14.3f\n", "nxr (packed, kernels)", tok_s_nxr, gbs_nxr,
               gbs_nxr / read_gbs);
        printf("%-28s %10.1f %12.2f %14.3f\n", "nxr (packed, a token a step)", tok_s_step, gbs_step,
               gbs_step / read_gbs);
        if (other)
            printf("%-28s %10.1f %12.2f %14.3f\n", "nxr on f32 weights", tok_s_f32,
                   tok_s_f32 * (double)f32_limit.bytes * 1e-9,
                   tok_s_f32 * (double)f32_limit.bytes * 1e-9 / f32_read_gbs);
        printf("%-28s %10.1f %12.2f %14.3f\n", "OpenMP row loops (f32)", tok_s_omp, gbs_omp,
               gbs_omp / omp_read_gbs);
        printf("%-28s %10.1f %12.2f %14.3f\n", "streaming read (the limit)", read_gbs / bytes * 1e9,
               read_gbs, 1.0);
        if (other)
            printf("%-28s %10.1f %12.2f %14.3f\n", "  read of the f32 copies",
                   f32_read_gbs / (double)f32_limit.bytes * 1e9, f32_read_gbs, 1.0);
        printf("%-28s %10.1f %12.2f %14.3f\n", "f32 read on OpenMP threads",
               omp_read_gbs / read_bytes * 1e9, omp_read_gbs, 1.0);
        printf("nxr / OpenMP: %.3fx; nxr step / OpenMP: %.3fx; tokens match: %s\n",
               tok_s_nxr / tok_s_omp, tok_s_step / tok_s_omp, match ? "yes" : "NO");
        if (other)
            printf("%s / f32 (nxr, same run): %.3fx; the first %zu of %zu tokens are f32's\n",
                   o.format_name, tok_s_nxr / tok_s_f32, same_as_f32, o.tokens);
        printf("nxr, per step: projections %.1f us, attention %.1f us, rest %.1f us, gaps "
               "between calls %.1f us (of %.1f us)\n",
               tm.projections * per, tm.attention * per, tm.rest * per, gaps * per, tm.step * per);
        printf("tokens (nxr):");
        for (size_t i = 0; i < o.tokens && i < 16; i++)
            printf(" %d", tok_nxr[i]);
        printf("%s\n", o.tokens > 16 ? " ..." : "");
        if (!match) {
            printf("tokens (omp):");
            for (size_t i = 0; i < o.tokens && i < 16; i++)
                printf(" %d", tok_omp[i]);
            printf("%s\n", o.tokens > 16 ? " ..." : "");
        }
    }
    read_limit_free(&limit);
    read_limit_free(&f32_limit);
    free(tok_nxr), free(tok_omp), free(again), free(tok_step);
    svc_llama_omp_destroy(r.omp);
    decode_nxr_destroy(r.nxr);
    decode_nxr_destroy(r.f32);
    svc_llama_destroy(&model);
    nxr_ctx_destroy(ctx);
    nxr_runtime_destroy(rt);
    return match ? 0 : 1;
}
