/*
 * The diagnostics emitter (see emit.h): a JSON back end that streams
 * and a text back end that fills each object's template when it ends.
 */
#include "base/emit.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void nxr__emit_init(struct nxr__emit *e, enum nxr__emit_format format, struct nxr__strbuf *out)
{
    memset(e, 0, sizeof(*e));
    e->format = format;
    e->out = out;
}

static struct nxr__emit_frame *top(struct nxr__emit *e)
{
    return e->depth > 0 ? &e->frame[e->depth - 1] : NULL;
}

/* A temporary buffer's failure becomes the output's, where it sticks. */
static void keep_failure(struct nxr__emit *e, const struct nxr__strbuf *sb)
{
    if (sb->failed != 0 && e->out->failed == 0)
        e->out->failed = sb->failed;
}

/* JSON: the comma and the key in front of a member. */
static void json_member(struct nxr__emit *e, const char *key)
{
    struct nxr__emit_frame *f = top(e);
    if (f == NULL)
        return;
    if (!f->first)
        nxr__strbuf_printf(e->out, ",");
    f->first = false;
    f->count++;
    if (!f->list && key != NULL) {
        nxr__strbuf_json_string(e->out, key);
        nxr__strbuf_printf(e->out, ":");
    }
}

/* Text: a member's text (n bytes at s) goes to the enclosing object under
 * its key, to the enclosing list's items, or, outermost, to the output. */
static void text_member(struct nxr__emit *e, const char *key, const char *s, size_t n)
{
    struct nxr__emit_frame *f = top(e);
    if (f == NULL) {
        nxr__strbuf_append(e->out, s, n);
        return;
    }
    f->count++;
    if (!f->list) {
        const char *k = key != NULL ? key : "";
        nxr__strbuf_append(&f->vals, k, strlen(k) + 1);
    }
    nxr__strbuf_append(&f->vals, s, n);
    if (!f->list)
        nxr__strbuf_append(&f->vals, "", 1);
}

/* The text of member `name` of the object f, or NULL. Bounded by the
 * buffer's length: a buffer whose growth failed may end inside an entry. */
static const char *lookup(const struct nxr__emit_frame *f, const char *name, size_t len, size_t *n)
{
    if (f->vals.data == NULL)
        return NULL;
    const char *p = f->vals.data, *end = p + f->vals.len;
    while (p < end) {
        const char *kend = memchr(p, '\0', (size_t)(end - p));
        const char *v = kend != NULL ? kend + 1 : end;
        const char *vend = v < end ? memchr(v, '\0', (size_t)(end - v)) : NULL;
        if (vend == NULL)
            return NULL;
        if ((size_t)(kend - p) == len && memcmp(p, name, len) == 0) {
            *n = (size_t)(vend - v);
            return v;
        }
        p = vend + 1;
    }
    return NULL;
}

/* Fills the template t of frame f into r ("{name}" from f's members, or in a
 * list "{count}" and "{items}"); an unknown name stays as written. */
static void fill(const struct nxr__emit_frame *f, const char *t, struct nxr__strbuf *r)
{
    while (*t != '\0') {
        const char *open = strchr(t, '{');
        const char *close = open != NULL ? strchr(open, '}') : NULL;
        if (close == NULL) {
            nxr__strbuf_append(r, t, strlen(t));
            return;
        }
        nxr__strbuf_append(r, t, (size_t)(open - t));
        const char *name = open + 1;
        size_t len = (size_t)(close - name), n = 0;
        const char *v = NULL;
        if (f->list && len == 5 && memcmp(name, "items", 5) == 0) {
            v = f->vals.data != NULL ? f->vals.data : "";
            n = f->vals.len;
        } else if (f->list && len == 5 && memcmp(name, "count", 5) == 0) {
            nxr__strbuf_printf(r, "%u", f->count);
            v = "";
        } else if (!f->list) {
            v = lookup(f, name, len, &n);
        }
        if (v != NULL)
            nxr__strbuf_append(r, v, n);
        else
            nxr__strbuf_append(r, open, (size_t)(close - open) + 1);
        t = close + 1;
    }
}

static void open_frame(struct nxr__emit *e, const char *key, const char *text, bool list)
{
    if (e->depth == NXR__EMIT_DEPTH) {
        if (e->out->failed == 0)
            e->out->failed = -EOVERFLOW;
        e->depth++; /* counted, so that the matching end closes nothing */
        return;
    }
    if (e->depth > NXR__EMIT_DEPTH) {
        e->depth++;
        return;
    }
    if (e->format == NXR__EMIT_JSON) {
        json_member(e, key);
        nxr__strbuf_printf(e->out, list ? "[" : "{");
    }
    struct nxr__emit_frame *f = &e->frame[e->depth++];
    *f = (struct nxr__emit_frame){.key = key, .text = text, .list = list, .first = true};
}

void nxr__emit_object(struct nxr__emit *e, const char *key, const char *text)
{
    open_frame(e, key, text, false);
}

void nxr__emit_list(struct nxr__emit *e, const char *key, const char *text)
{
    open_frame(e, key, text, true);
}

void nxr__emit_end(struct nxr__emit *e)
{
    if (e->depth == 0)
        return;
    if (e->depth > NXR__EMIT_DEPTH) {
        e->depth--;
        return;
    }
    struct nxr__emit_frame f = e->frame[--e->depth];
    if (e->format == NXR__EMIT_JSON) {
        nxr__strbuf_printf(e->out, f.list ? "]" : "}");
        if (e->depth == 0)
            nxr__strbuf_printf(e->out, "\n");
        return;
    }
    struct nxr__strbuf r = {0};
    const char *t = f.text != NULL ? f.text : f.list ? "{items}" : "";
    keep_failure(e, &f.vals);
    if (f.vals.failed == 0) /* else incomplete, and the output failed already */
        fill(&f, t, &r);
    keep_failure(e, &r);
    free(f.vals.data);
    text_member(e, f.key, r.data != NULL ? r.data : "", r.len);
    free(r.data);
}

/* A scalar: json_literal is its JSON (or json_str, a string to escape), plain
 * its text when no text is given; text's "{}" stand for plain. */
static void scalar(struct nxr__emit *e, const char *key, const char *json_literal,
                   const char *json_str, const char *plain, const char *text)
{
    if (e->depth > NXR__EMIT_DEPTH)
        return;
    if (e->format == NXR__EMIT_JSON) {
        json_member(e, key);
        if (json_str != NULL)
            nxr__strbuf_json_string(e->out, json_str);
        else
            nxr__strbuf_printf(e->out, "%s", json_literal);
        return;
    }
    if (text == NULL) {
        text_member(e, key, plain, strlen(plain));
        return;
    }
    struct nxr__strbuf r = {0};
    for (const char *at; (at = strstr(text, "{}")) != NULL; text = at + 2) {
        nxr__strbuf_append(&r, text, (size_t)(at - text));
        nxr__strbuf_append(&r, plain, strlen(plain));
    }
    nxr__strbuf_append(&r, text, strlen(text));
    keep_failure(e, &r);
    text_member(e, key, r.data != NULL ? r.data : "", r.len);
    free(r.data);
}

void nxr__emit_str(struct nxr__emit *e, const char *key, const char *s, const char *text)
{
    scalar(e, key, "null", s, s != NULL ? s : "", text);
}

void nxr__emit_int(struct nxr__emit *e, const char *key, int64_t v, const char *text)
{
    char buf[24];
    snprintf(buf, sizeof(buf), "%" PRId64, v);
    scalar(e, key, buf, NULL, buf, text);
}

void nxr__emit_uint(struct nxr__emit *e, const char *key, uint64_t v, const char *text)
{
    char buf[24];
    snprintf(buf, sizeof(buf), "%" PRIu64, v);
    scalar(e, key, buf, NULL, buf, text);
}

void nxr__emit_double(struct nxr__emit *e, const char *key, double v, const char *text)
{
    char buf[32];
    if (!isfinite(v)) {
        scalar(e, key, "null", NULL, "-", text);
        return;
    }
    snprintf(buf, sizeof(buf), "%.6g", v);
    scalar(e, key, buf, NULL, buf, text);
}

void nxr__emit_bool(struct nxr__emit *e, const char *key, bool v, const char *text)
{
    scalar(e, key, v ? "true" : "false", NULL, v ? "true" : "false", text);
}

void nxr__emit_null(struct nxr__emit *e, const char *key, const char *text)
{
    /* No value to stand for "{}": the text is shown as it is (it may be a
     * string read from the system, such as a cgroup path). */
    if (e->format == NXR__EMIT_TEXT && text != NULL) {
        if (e->depth <= NXR__EMIT_DEPTH)
            text_member(e, key, text, strlen(text));
        return;
    }
    scalar(e, key, "null", NULL, "", NULL);
}
