/* `nxr demo`: the subcommand's flags and output (the run is service/demo.h). */
#ifndef NXR_TOOLS_DEMO_CMD_H
#define NXR_TOOLS_DEMO_CMD_H

#include <stddef.h>
#include <stdint.h>

#include "runtime/nxr.h"
#include "tools/demo_flags.h"

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

/* --metrics-port and --metrics-hold, rows of both demos' flag tables
 * (demo_flags.h): *port stays -1 until given. */
#define NXR_TOOL_METRICS_FLAGS(port, hold)                                                         \
    NXR_TOOL_FLAG_NUM("--metrics-port", NXR_TOOL_FLAG_LONG, (port), 0, 65535),                     \
        NXR_TOOL_FLAG_NUM("--metrics-hold", NXR_TOOL_FLAG_LONG, (hold), 1, 1000000)
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
#endif /* NXR_TOOLS_DEMO_CMD_H */
