/*
 * The body marker (nxr__tls, see internal/exec.h): the one piece of
 * per-thread state the nesting rules read.
 *
 * Why a marker and not "is this thread a worker": a body runs on workers of
 * the built-in team, on a host pool's threads and on a calling thread that
 * takes part in a region. The rules must give the same answer whichever of
 * them runs the body, so they ask what the thread is doing (running a body
 * of domain X), never who the thread is.
 */
#include "executor/internal/exec.h"

_Thread_local struct nxr__exec_tls nxr__tls;
