/* `nxr demo`: the subcommand's flags and output (the run is service/demo.h). */
#ifndef NXR_TOOLS_DEMO_CMD_H
#define NXR_TOOLS_DEMO_CMD_H

#include <stddef.h>
#include <stdint.h>

#include "runtime/nxr.h"

/* Runs `nxr demo` with argv[0..argc) the flags after "demo" (argv - 2 must
 * be the program's own argv: the command may re-execute itself, see
 * demo_cmd.c). Returns the exit status: 0, 1 (the run failed), 2 (bad
 * input: one line naming the flag on stderr). */
int nxr_tool_demo(int argc, char **argv);

/* The usage lines of `nxr demo` (--model mlp) and of its language model. */
extern const char nxr_tool_demo_usage[];
extern const char nxr_tool_demo_llama_usage[];

/* `nxr demo [--model llama]`: argv as nxr_tool_demo's, --model removed
 * (tools/demo_llama_cmd.c). The same exit statuses. */
int nxr_tool_demo_llama(int argc, char **argv);

/* The flag parsers both share: each prints one line naming the flag on
 * stderr and returns 2 when the value is bad, else 0. */
/* The flag at argv[*i], split the way both demos read flags: "--name=value"
 * or "--name value" for a flag of `valued`, "--name" alone for one of
 * `plain`. On 0, f->name is the flag's name and f->value its value (NULL for
 * a plain flag), and *i the last argument it used; else the exit status 2,
 * having said why in one line (unknown flag, a value missing or given to a
 * plain flag). */
struct nxr_tool_flag {
    const char *name, *value;
    char buf[32];
};
int nxr_tool_demo_flag(int argc, char **argv, int *i, const char *const *plain, size_t nplain,
                       const char *const *valued, size_t nvalued, struct nxr_tool_flag *f);
int nxr_tool_demo_bad(const char *flag, const char *fmt, const char *value);
/* A decimal integer in [lo, hi], the whole string. */
/* --plot's FILE: non-empty, in a directory this process may write (checked
 * before the run, not after it). 0 with *out = v, or the exit status 2. */
int nxr_tool_demo_plot(const char *flag, const char *v, const char **out);
/* --metrics-port and --metrics-hold, for both demos: 0 if flag is one of
 * them (read into *port / *hold; *port -1 until given), 1 if it is not,
 * or the exit status 2 having said why. */
int nxr_tool_demo_metrics_flag(const char *flag, const char *value, long *port, long *hold);
/* Starts the page when --metrics-port was given (port >= 0): 0, or the exit
 * status. */
struct nxr_tool_metrics;
int nxr_tool_demo_metrics_start(struct nxr_tool_metrics *m, long port, long hold);
/* What differs between the two demos when one is run and reported. */
struct nxr_tool_demo_kind {
    size_t result_size;
    /* svc_demo_run / svc_llama_demo_run on the parsed config. */
    int (*run)(const void *config, void *result, bool *bad_input);
    const char *(*error)(const void *result); /* the result's error line */
    void (*report)(const void *result, bool json);
};

/* Runs the demo with --metrics-port's page around it (the config's
 * runtime_hook fields at *hook and *hook_arg are set when the page is up),
 * prints its report, and returns the exit status. */
int nxr_tool_demo_run(const struct nxr_tool_demo_kind *k, const void *config,
                      void (**hook)(void *, nxr_runtime_t *, bool), void **hook_arg, long port,
                      long hold, bool json);
int nxr_tool_demo_size(const char *flag, const char *v, uint64_t lo, uint64_t hi, uint64_t *out);
/* MIN-MAX, each in [min, max], MIN <= MAX. */
int nxr_tool_demo_range(const char *flag, const char *v, uint64_t min, uint64_t max, size_t *lo,
                        size_t *hi);

#endif /* NXR_TOOLS_DEMO_CMD_H */
