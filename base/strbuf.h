/*
 * A growable string for diagnostics. Appends never fail loudly: the first
 * allocation failure sticks and nxr__strbuf_take reports it as -ENOMEM.
 */
#ifndef NXR_BASE_STRBUF_H
#define NXR_BASE_STRBUF_H

#include <stddef.h>

struct nxr__strbuf {
    char *data;
    size_t len;
    size_t cap;
    int failed; /* -ENOMEM after a failed growth (or the writer's own error) */
};

void nxr__strbuf_printf(struct nxr__strbuf *sb, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Appends the n bytes at s (which may hold NULs). */
void nxr__strbuf_append(struct nxr__strbuf *sb, const char *s, size_t n);

/* Appends s as a JSON string literal (quoted, escaped). */
void nxr__strbuf_json_string(struct nxr__strbuf *sb, const char *s);

/* Hands the string to *out (caller frees) and resets sb. 0 or sb->failed. */
int nxr__strbuf_take(struct nxr__strbuf *sb, char **out);

#endif /* NXR_BASE_STRBUF_H */
