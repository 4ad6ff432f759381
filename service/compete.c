/*
 * Noisy neighbours (see compete.h).
 */
#include "service/compete.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

/* The child: pin, report, spin. Only async-signal-safe calls before the
 * loop (the parent may have threads). */
static void busy(int cpu, pid_t parent, int report_fd)
{
    (void)prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) /* the parent died before the line above */
        _exit(1);
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    int rc = sched_setaffinity(0, sizeof(set), &set) == 0 ? 0 : -errno;
    if (write(report_fd, &rc, sizeof(rc)) != (ssize_t)sizeof(rc) || rc != 0)
        _exit(1);
    close(report_fd);
    volatile unsigned long spin = 0;
    for (;;)
        spin++;
}

int svc_compete_start(struct svc_compete *c, hwloc_const_bitmap_t cpus, unsigned n)
{
    memset(c, 0, sizeof(*c));
    int weight = hwloc_bitmap_weight(cpus);
    if (n > SVC_COMPETE_MAX || weight <= 0)
        return -EINVAL;
    int up[SVC_COMPETE_MAX], order[SVC_COMPETE_MAX], k = 0, cpu;
    hwloc_bitmap_foreach_begin(cpu, cpus)
    {
        if (k < SVC_COMPETE_MAX)
            up[k++] = cpu; /* the lowest 64: a compete set larger is not useful */
    }
    hwloc_bitmap_foreach_end();
    for (int i = 0; i < k; i++)
        order[i] = up[k - 1 - i]; /* highest first */
    const pid_t self = getpid();
    for (unsigned i = 0; i < n; i++) {
        int fds[2];
        if (pipe2(fds, O_CLOEXEC) != 0) {
            int rc = -errno;
            svc_compete_stop(c);
            return rc;
        }
        cpu = order[i % (unsigned)k];
        pid_t pid = fork();
        if (pid == 0) {
            close(fds[0]);
            busy(cpu, self, fds[1]);
        }
        close(fds[1]);
        int rc = pid < 0 ? -errno : 0;
        if (pid > 0) {
            c->pids[c->count] = pid;
            c->cpus[c->count++] = cpu;
            /* Bounded: the child writes once it is pinned, or exits (EOF). */
            ssize_t got;
            do
                got = read(fds[0], &rc, sizeof(rc));
            while (got < 0 && errno == EINTR);
            if (got != (ssize_t)sizeof(rc) && rc == 0)
                rc = -ECHILD;
        }
        close(fds[0]);
        if (rc != 0) {
            svc_compete_stop(c);
            return rc;
        }
    }
    return 0;
}

void svc_compete_stop(struct svc_compete *c)
{
    for (unsigned i = 0; i < c->count; i++)
        kill(c->pids[i], SIGKILL);
    for (unsigned i = 0; i < c->count; i++) {
        while (waitpid(c->pids[i], NULL, 0) < 0 && errno == EINTR) {
        }
    }
    c->count = 0;
}

void svc_compete_cpus(const struct svc_compete *c, char *buf, size_t size)
{
    size_t used = 0;
    buf[0] = '\0';
    for (unsigned i = 0; i < c->count && used < size; i++) {
        int n = snprintf(buf + used, size - used, "%s%d", i ? "," : "", c->cpus[i]);
        if (n < 0)
            break;
        used += (size_t)n;
    }
}
