/* The demos' flag tables and their one reader (see demo_flags.h). */
#include "tools/demo_flags.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int nxr_tool_demo_bad(const char *flag, const char *fmt, const char *value)
{
    fprintf(stderr, "nxr demo: %s: ", flag);
    fprintf(stderr, fmt, value);
    fputc('\n', stderr);
    return 2;
}

int nxr_tool_demo_size(const char *flag, const char *v, uint64_t lo, uint64_t hi, uint64_t *out)
{
    char *end;
    errno = 0;
    if (v[0] < '0' || v[0] > '9')
        return nxr_tool_demo_bad(flag, "'%s' is not a non-negative integer", v);
    unsigned long long x = strtoull(v, &end, 10);
    if (errno != 0 || *end != '\0')
        return nxr_tool_demo_bad(flag, "'%s' is not a non-negative integer", v);
    if (x < lo || x > hi) {
        fprintf(stderr, "nxr demo: %s: %s is outside %" PRIu64 "..%" PRIu64 "\n", flag, v, lo, hi);
        return 2;
    }
    *out = x;
    return 0;
}

int nxr_tool_demo_range(const char *flag, const char *v, uint64_t min, uint64_t max, size_t *lo,
                        size_t *hi)
{
    const char *dash = strchr(v, '-');
    char a[32], b[32];
    if (dash == NULL || (size_t)(dash - v) >= sizeof(a) || strlen(dash + 1) >= sizeof(b) ||
        dash == v || dash[1] == '\0')
        return nxr_tool_demo_bad(flag, "'%s' is not MIN-MAX (e.g. 1-16)", v);
    memcpy(a, v, (size_t)(dash - v));
    a[dash - v] = '\0';
    strcpy(b, dash + 1);
    uint64_t x, y;
    if (nxr_tool_demo_size(flag, a, min, max, &x) != 0 ||
        nxr_tool_demo_size(flag, b, min, max, &y) != 0)
        return 2;
    if (x > y)
        return nxr_tool_demo_bad(flag, "'%s': MIN is above MAX", v);
    *lo = (size_t)x;
    *hi = (size_t)y;
    return 0;
}

int nxr_tool_demo_plot(const char *flag, const char *value, void *to)
{
    if (value[0] == '\0')
        return nxr_tool_demo_bad(flag, "%sis empty (a file name: FILE.svg)", "");
    char dir[4096];
    const char *slash = strrchr(value, '/');
    snprintf(dir, sizeof dir, "%.*s", slash == NULL ? 1 : (int)(slash - value + 1),
             slash == NULL ? "." : value);
    if (access(dir, W_OK) != 0)
        return nxr_tool_demo_bad(flag, "cannot write in the directory of '%s'", value);
    *(const char **)to = value;
    return 0;
}

static bool takes_value(enum nxr_tool_flag_kind kind)
{
    return kind != NXR_TOOL_FLAG_SET && kind != NXR_TOOL_FLAG_CLEAR;
}

/* Reads value into what s points at. */
static int store(const struct nxr_tool_flag_spec *s, const char *flag, const char *value)
{
    uint64_t x = 0;
    int rc = 0;
    switch (s->kind) {
    case NXR_TOOL_FLAG_SET:
    case NXR_TOOL_FLAG_CLEAR:
        *(bool *)s->to = s->kind == NXR_TOOL_FLAG_SET;
        return 0;
    case NXR_TOOL_FLAG_RANGE:
        return nxr_tool_demo_range(flag, value, s->lo, s->hi, s->to, s->to2);
    case NXR_TOOL_FLAG_TEXT:
        if (value[0] == '\0')
            return nxr_tool_demo_bad(flag, "%sis empty", "");
        *(const char **)s->to = value;
        return 0;
    case NXR_TOOL_FLAG_CALL:
        return s->parse(flag, value, s->to);
    default:
        if ((rc = nxr_tool_demo_size(flag, value, s->lo, s->hi, &x)) != 0)
            return rc;
    }
    switch (s->kind) {
    case NXR_TOOL_FLAG_SIZE:
        *(size_t *)s->to = (size_t)x;
        break;
    case NXR_TOOL_FLAG_UINT:
        *(unsigned *)s->to = (unsigned)x;
        break;
    case NXR_TOOL_FLAG_U64:
        *(uint64_t *)s->to = x;
        break;
    case NXR_TOOL_FLAG_LONG:
        *(long *)s->to = (long)x;
        break;
    default: /* NXR_TOOL_FLAG_SECONDS */
        *(double *)s->to = (double)x;
    }
    return 0;
}

int nxr_tool_flags_parse(int argc, char **argv, const struct nxr_tool_flag_spec *specs, size_t n)
{
    for (int i = 0; i < argc; i++) {
        const char *name = argv[i], *value = NULL;
        char buf[32];
        const char *eq = strchr(name, '=');
        if (strncmp(name, "--", 2) == 0 && eq != NULL && (size_t)(eq - name) < sizeof buf) {
            memcpy(buf, name, (size_t)(eq - name));
            buf[eq - name] = '\0';
            name = buf;
            value = eq + 1;
        }
        const struct nxr_tool_flag_spec *s = NULL;
        for (size_t k = 0; k < n && s == NULL; k++)
            if (strcmp(name, specs[k].name) == 0)
                s = &specs[k];
        if (s == NULL) {
            fprintf(stderr, "nxr demo: %s: unknown flag (see nxr --help)\n", name);
            return 2;
        }
        if (!takes_value(s->kind) && value != NULL)
            return nxr_tool_demo_bad(name, "takes no value (got '%s')", value);
        if (takes_value(s->kind) && value == NULL) {
            if (i + 1 >= argc) {
                fprintf(stderr, "nxr demo: %s: needs a value\n", name);
                return 2;
            }
            value = argv[++i];
        }
        int rc = store(s, name, value);
        if (rc != 0)
            return rc;
    }
    return 0;
}
