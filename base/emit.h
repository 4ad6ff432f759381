/*
 * The emitter of the diagnostics: one walk over a set of facts writes them
 * either as JSON (for tools) or as text (for people), so that the two formats
 * cannot disagree and no fact is written twice (nxr_runtime_describe, the
 * pool's part of it).
 *
 * Each call names a fact once: its JSON key, its value and how text shows it.
 *
 *   - A scalar (str, int, uint, bool, double, null) takes a text rendering: NULL
 *     shows the value as JSON would but unquoted (a null value as nothing);
 *     otherwise the text itself, in which "{}" stands for that rendering
 *     (", {} release(s) refused" or " (lowered by the CPU quota)").
 *   - An object or a list takes a text template, filled when it ends: in an
 *     object "{key}" stands for the text of the member of that key (members
 *     need not be named in JSON's order, and a member it does not name is
 *     JSON only); in a list "{count}" is the number of elements and "{items}"
 *     their texts one after the other. A NULL template shows an object as
 *     nothing and a list as "{items}". A template without braces is shown as
 *     it is (a CPU list "0-3" for a list of CPU ids).
 *
 * The JSON back end streams (members in call order, strings escaped, the
 * document closed by a newline); the text back end keeps each open object's
 * member texts until its end. A key without a value names nothing: "{key}"
 * stays in the text as written, so a typo shows. A failed allocation sticks
 * in the output buffer (nxr__strbuf_take reports -ENOMEM); nesting deeper
 * than NXR__EMIT_DEPTH, a bug of the walk, is -EOVERFLOW there. Single-threaded:
 * one emitter per walk, on the caller's stack.
 */
#ifndef NXR_BASE_EMIT_H
#define NXR_BASE_EMIT_H

#include <stdbool.h>
#include <stdint.h>

#include "base/strbuf.h"

enum nxr__emit_format { NXR__EMIT_TEXT, NXR__EMIT_JSON };

/* Deepest nesting of objects and lists (describe uses 4: a domain's CPU list). */
#define NXR__EMIT_DEPTH 8

struct nxr__emit_frame {
    const char *key;         /* its key in the enclosing object, or NULL */
    const char *text;        /* the template, filled at the end */
    bool list;               /* a list: elements have no key */
    bool first;              /* JSON: no comma before the next member */
    unsigned count;          /* a list's elements so far */
    struct nxr__strbuf vals; /* text: "key\0text\0" per member; a list's items */
};

struct nxr__emit {
    enum nxr__emit_format format;
    struct nxr__strbuf *out;
    int depth; /* open objects and lists */
    struct nxr__emit_frame frame[NXR__EMIT_DEPTH];
};

/* Writes to out (appended). The outermost value must be an object. */
void nxr__emit_init(struct nxr__emit *e, enum nxr__emit_format format, struct nxr__strbuf *out);

/* Opens an object or a list: key is NULL for an element of a list and for
 * the outermost object, text its template (above). The pointer is kept until
 * the matching nxr__emit_end. */
void nxr__emit_object(struct nxr__emit *e, const char *key, const char *text);
void nxr__emit_list(struct nxr__emit *e, const char *key, const char *text);
void nxr__emit_end(struct nxr__emit *e);

/* A scalar member (key NULL in a list). s == NULL is JSON null. A null's
 * text has no "{}" to fill: it is shown as it is. */
void nxr__emit_str(struct nxr__emit *e, const char *key, const char *s, const char *text);
void nxr__emit_int(struct nxr__emit *e, const char *key, int64_t v, const char *text);
void nxr__emit_uint(struct nxr__emit *e, const char *key, uint64_t v, const char *text);
void nxr__emit_bool(struct nxr__emit *e, const char *key, bool v, const char *text);
/* A measurement: JSON (and "{}") show it with six significant digits; a
 * value that is not finite is JSON null (and "{}" shows "-"). */
void nxr__emit_double(struct nxr__emit *e, const char *key, double v, const char *text);
void nxr__emit_null(struct nxr__emit *e, const char *key, const char *text);

#endif /* NXR_BASE_EMIT_H */
