/* The demo reports' emitter helpers (see report_emit.h). */
#include "service/report_emit.h"

#include <stdarg.h>
#include <stdlib.h>

void svc_emit_num(struct nxr__emit *e, const char *key, double v, const char *fmt)
{
    char text[64];
    snprintf(text, sizeof(text), fmt, v);
    nxr__emit_double(e, key, v, text);
}

void svc_emit_count(struct nxr__emit *e, const char *key, size_t v, const char *fmt)
{
    char text[64];
    snprintf(text, sizeof(text), fmt, v);
    nxr__emit_uint(e, key, v, text);
}

const char *svc_tmpl(char *buf, size_t size, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, size, fmt, ap);
    va_end(ap);
    return buf;
}

void svc_emit_report(FILE *f, enum nxr__emit_format format,
                     void (*walk)(struct nxr__emit *e, const void *result), const void *result)
{
    struct nxr__strbuf sb = {0};
    struct nxr__emit e;
    nxr__emit_init(&e, format, &sb);
    walk(&e, result);
    char *out = NULL;
    if (nxr__strbuf_take(&sb, &out) != 0) {
        fprintf(stderr, "nxr demo: the report: out of memory\n");
        return;
    }
    fputs(out, f);
    free(out);
}
