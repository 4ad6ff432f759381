/* `nxr top`: every nxr runtime of this user, from their counters pages. */
#ifndef NXR_TOOLS_TOP_CMD_H
#define NXR_TOOLS_TOP_CMD_H

/* Runs `nxr top` with argv[0..argc) the flags after "top". Returns the exit
 * status: 0, 1 (the registry could not be read: the message says why), 2
 * (a bad flag: one line on stderr). */
int nxr_tool_top(int argc, char **argv);

/* Its usage lines. */
extern const char nxr_tool_top_usage[];

#endif /* NXR_TOOLS_TOP_CMD_H */
