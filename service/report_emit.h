/*
 * What both demo reports (report.c, llama_report.c) write through the
 * diagnostics' emitter (base/emit.h): one walk over a result makes either
 * the JSON or the table. A scalar's text is its value formatted for its
 * column; an object's template, formatted first with what the table says
 * beside its members (svc_tmpl), places them.
 */
#ifndef NXR_SERVICE_REPORT_EMIT_H
#define NXR_SERVICE_REPORT_EMIT_H

#include <stddef.h>
#include <stdio.h>

#include "base/emit.h"

/* A measurement; its text is v formatted by fmt (a printf format of one double). */
void svc_emit_num(struct nxr__emit *e, const char *key, double v, const char *fmt);

/* A count; its text is v formatted by fmt (a printf format of one size_t). */
void svc_emit_count(struct nxr__emit *e, const char *key, size_t v, const char *fmt);

/* fmt formatted into buf (a template: its "{member}"s are left for the emitter). */
const char *svc_tmpl(char *buf, size_t size, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Runs walk(e, result) with an emitter of the format and writes what it made
 * to f (on a failed allocation, one line on stderr instead). */
void svc_emit_report(FILE *f, enum nxr__emit_format format,
                     void (*walk)(struct nxr__emit *e, const void *result), const void *result);

#endif /* NXR_SERVICE_REPORT_EMIT_H */
