/* `nxr demo`: the subcommand's flags and output (the run is service/demo.h). */
#ifndef NXR_TOOLS_DEMO_CMD_H
#define NXR_TOOLS_DEMO_CMD_H

/* Runs `nxr demo` with argv[0..argc) the flags after "demo" (argv - 2 must
 * be the program's own argv: the command may re-execute itself, see
 * demo_cmd.c). Returns the exit status: 0, 1 (the run failed), 2 (bad
 * input: one line naming the flag on stderr). */
int nxr_tool_demo(int argc, char **argv);

/* The usage lines of `nxr demo`. */
extern const char nxr_tool_demo_usage[];

#endif /* NXR_TOOLS_DEMO_CMD_H */
