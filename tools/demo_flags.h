/*
 * The flags of `nxr demo` (both models) as tables: each flag names how its
 * value is read and where it goes, and one loop (nxr_tool_flags_parse)
 * reads argv against a table. Strict: "--name=value" or "--name value" for
 * a flag with a value, "--name" alone for one without; an unknown flag, a
 * missing value, a value given to a flag that takes none, or a value out of
 * its bounds is one line on stderr naming the flag, and exit status 2.
 */
#ifndef NXR_TOOLS_DEMO_FLAGS_H
#define NXR_TOOLS_DEMO_FLAGS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum nxr_tool_flag_kind {
    NXR_TOOL_FLAG_SET,     /* no value: *(bool *)to = true */
    NXR_TOOL_FLAG_CLEAR,   /* no value: *(bool *)to = false */
    NXR_TOOL_FLAG_SIZE,    /* a decimal integer in [lo, hi] into a size_t */
    NXR_TOOL_FLAG_UINT,    /* ... into an unsigned */
    NXR_TOOL_FLAG_U64,     /* ... into a uint64_t */
    NXR_TOOL_FLAG_LONG,    /* ... into a long */
    NXR_TOOL_FLAG_SECONDS, /* ... into a double (whole seconds) */
    NXR_TOOL_FLAG_RANGE,   /* MIN-MAX, each in [lo, hi], MIN <= MAX, into two size_t (to, to2) */
    NXR_TOOL_FLAG_TEXT,    /* a non-empty string into a const char * */
    NXR_TOOL_FLAG_CALL,    /* parse(flag, value, to): 0, or 2 having said why */
};

struct nxr_tool_flag_spec {
    const char *name; /* "--clients" */
    enum nxr_tool_flag_kind kind;
    void *to, *to2;
    uint64_t lo, hi;
    int (*parse)(const char *flag, const char *value, void *to);
};

/* Rows of a table: a flag without a value, a number in [lo, hi], MIN-MAX, a
 * string, or a flag read by its own parser. */
#define NXR_TOOL_FLAG(name_, kind_, to_)                                                           \
    {                                                                                              \
        .name = (name_), .kind = (kind_), .to = (to_)                                              \
    }
#define NXR_TOOL_FLAG_NUM(name_, kind_, to_, lo_, hi_)                                             \
    {                                                                                              \
        .name = (name_), .kind = (kind_), .to = (to_), .lo = (lo_), .hi = (hi_)                    \
    }
#define NXR_TOOL_FLAG_MIN_MAX(name_, min_to, max_to, lo_, hi_)                                     \
    {                                                                                              \
        .name = (name_), .kind = NXR_TOOL_FLAG_RANGE, .to = (min_to), .to2 = (max_to),             \
        .lo = (lo_), .hi = (hi_)                                                                   \
    }
#define NXR_TOOL_FLAG_PARSE(name_, to_, parse_)                                                    \
    {                                                                                              \
        .name = (name_), .kind = NXR_TOOL_FLAG_CALL, .to = (to_), .parse = (parse_)                \
    }

/* Reads argv[0..argc) against the n flags of specs. 0, or the exit status 2
 * having said why in one line. */
int nxr_tool_flags_parse(int argc, char **argv, const struct nxr_tool_flag_spec *specs, size_t n);

/* One line "nxr demo: FLAG: " + fmt (with value) on stderr; returns 2. */
int nxr_tool_demo_bad(const char *flag, const char *fmt, const char *value);

/* A decimal integer in [lo, hi], the whole string: 0, or 2 having said why. */
int nxr_tool_demo_size(const char *flag, const char *v, uint64_t lo, uint64_t hi, uint64_t *out);

/* MIN-MAX, each in [min, max], MIN <= MAX: 0, or 2 having said why. */
int nxr_tool_demo_range(const char *flag, const char *v, uint64_t min, uint64_t max, size_t *lo,
                        size_t *hi);

/* --plot's FILE (a NXR_TOOL_FLAG_CALL parser; to is a const char **):
 * non-empty, in a directory this process may write (checked before the
 * run, not after it). */
int nxr_tool_demo_plot(const char *flag, const char *value, void *to);

#endif /* NXR_TOOLS_DEMO_FLAGS_H */
