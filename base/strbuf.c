/*
 * Growable diagnostic strings (see strbuf.h).
 */
#include "base/strbuf.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/internal/sys.h"

static int grow(struct nxr__strbuf *sb, size_t need)
{
    if (sb->failed)
        return sb->failed;
    if (sb->len + need + 1 <= sb->cap)
        return 0;
    size_t cap = sb->cap ? sb->cap : 256;
    while (cap < sb->len + need + 1)
        cap *= 2;
    char *data = nxr__fault_hit(NXR_FAULT_ALLOC) ? NULL : realloc(sb->data, cap);
    if (data == NULL) {
        sb->failed = -ENOMEM;
        return sb->failed;
    }
    sb->data = data;
    sb->cap = cap;
    return 0;
}

void nxr__strbuf_printf(struct nxr__strbuf *sb, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0 || grow(sb, (size_t)n) != 0)
        return;
    va_start(ap, fmt);
    vsnprintf(sb->data + sb->len, sb->cap - sb->len, fmt, ap);
    va_end(ap);
    sb->len += (size_t)n;
}

void nxr__strbuf_append(struct nxr__strbuf *sb, const char *s, size_t n)
{
    if (n == 0 || grow(sb, n) != 0)
        return;
    memcpy(sb->data + sb->len, s, n);
    sb->len += n;
}

void nxr__strbuf_json_string(struct nxr__strbuf *sb, const char *s)
{
    nxr__strbuf_printf(sb, "\"");
    for (; *s != '\0'; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\')
            nxr__strbuf_printf(sb, "\\%c", c);
        else if (c < 0x20)
            nxr__strbuf_printf(sb, "\\u%04x", c);
        else
            nxr__strbuf_printf(sb, "%c", c);
    }
    nxr__strbuf_printf(sb, "\"");
}

int nxr__strbuf_take(struct nxr__strbuf *sb, char **out)
{
    *out = NULL;
    int rc = sb->failed ? sb->failed : grow(sb, 0);
    if (rc != 0) {
        free(sb->data);
    } else {
        sb->data[sb->len] = '\0';
        *out = sb->data;
    }
    sb->data = NULL;
    sb->len = sb->cap = 0;
    sb->failed = 0;
    return rc;
}
