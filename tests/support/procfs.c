/* Test support: /proc readers (see procfs.h). */
#include "tests/support/procfs.h"

#include <dirent.h>
#include <pthread.h>
#include <stdbool.h>
#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

int nxr_test_thread_count(void)
{
    DIR *dir = opendir("/proc/self/task");
    if (dir == NULL)
        return -1;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(dir)) != NULL) {
        if (e->d_name[0] != '.')
            n++;
    }
    closedir(dir);
    return n;
}

static void *no_work(void *arg)
{
    return arg;
}

int nxr_test_thread_baseline(void)
{
    const int before = nxr_test_thread_count();
    pthread_t t;
    if (pthread_create(&t, NULL, no_work, NULL) != 0)
        return -1;
    pthread_join(t, NULL);
    /* The joined thread can linger in /proc for a moment; a helper the
     * sanitizer started stays. */
    int n = nxr_test_wait_thread_count(before);
    return n;
}

size_t nxr_test_threads_named(const char *prefix, pid_t *tids, size_t max)
{
    DIR *dir = opendir("/proc/self/task");
    if (dir == NULL)
        return 0;
    size_t n = 0;
    struct dirent *e;
    while ((e = readdir(dir)) != NULL) {
        if (e->d_name[0] == '.')
            continue;
        char path[300], comm[32] = "";
        snprintf(path, sizeof(path), "/proc/self/task/%s/comm", e->d_name);
        FILE *f = fopen(path, "r");
        if (f == NULL)
            continue;
        if (fgets(comm, sizeof(comm), f) == NULL)
            comm[0] = '\0';
        fclose(f);
        if (strncmp(comm, prefix, strlen(prefix)) == 0) {
            if (n < max)
                tids[n] = (pid_t)atoi(e->d_name);
            n++;
        }
    }
    closedir(dir);
    return n;
}

int nxr_test_thread_affinity(pid_t tid, hwloc_bitmap_t out)
{
    cpu_set_t *set = CPU_ALLOC(8192);
    size_t size = CPU_ALLOC_SIZE(8192);
    if (set == NULL)
        return -ENOMEM;
    int rc = sched_getaffinity(tid, size, set) == 0 ? 0 : -errno;
    hwloc_bitmap_zero(out);
    for (int cpu = 0; rc == 0 && cpu < 8192; cpu++) {
        if (CPU_ISSET_S(cpu, size, set))
            hwloc_bitmap_set(out, (unsigned)cpu);
    }
    CPU_FREE(set);
    return rc;
}

/* A safety net, not an ordering: a rendezvous that never happens ends the
 * wait (and the test fails on its own check) instead of hanging. */
static bool before(const struct timespec *deadline)
{
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return now.tv_sec < deadline->tv_sec ||
           (now.tv_sec == deadline->tv_sec && now.tv_nsec < deadline->tv_nsec);
}

static struct timespec deadline_in(int ms)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    t.tv_sec += ms / 1000;
    t.tv_nsec += (long)(ms % 1000) * 1000000L;
    if (t.tv_nsec >= 1000000000L) {
        t.tv_sec++;
        t.tv_nsec -= 1000000000L;
    }
    return t;
}

int nxr_test_wait_thread_count(int want)
{
    struct timespec deadline = deadline_in(2000);
    int n = nxr_test_thread_count();
    while (n != want && before(&deadline)) {
        sched_yield();
        n = nxr_test_thread_count();
    }
    return n;
}

int nxr_test_worker_domain(void)
{
    char path[64], comm[32] = "";
    snprintf(path, sizeof(path), "/proc/self/task/%ld/comm", (long)syscall(SYS_gettid));
    FILE *f = fopen(path, "r");
    if (f != NULL) {
        if (fgets(comm, sizeof(comm), f) == NULL)
            comm[0] = '\0';
        fclose(f);
    }
    int id = -1;
    return sscanf(comm, "nxr-d%d-", &id) == 1 ? id : -1;
}

long nxr_test_thread_voluntary_switches(pid_t tid)
{
    char path[64], line[128];
    snprintf(path, sizeof(path), "/proc/self/task/%d/status", (int)tid);
    FILE *f = fopen(path, "r");
    if (f == NULL)
        return -1;
    long n = -1;
    while (fgets(line, sizeof(line), f) != NULL) {
        if (sscanf(line, "voluntary_ctxt_switches: %ld", &n) == 1)
            break;
    }
    fclose(f);
    return n;
}

bool nxr_test_wait_until(bool (*pred)(void *arg), void *arg, int ms)
{
    struct timespec deadline = deadline_in(ms);
    do {
        if (pred(arg))
            return true;
        sched_yield();
    } while (before(&deadline));
    return pred(arg);
}

void nxr_test_wait_at_least(atomic_int *flag, int want, int ms)
{
    struct timespec deadline = deadline_in(ms);
    while (atomic_load(flag) < want && before(&deadline))
        sched_yield();
}

char nxr_test_thread_state(pid_t tid)
{
    char path[64], line[512];
    snprintf(path, sizeof(path), "/proc/self/task/%d/stat", (int)tid);
    FILE *f = fopen(path, "r");
    if (f == NULL)
        return '?';
    char state = '?';
    if (fgets(line, sizeof(line), f) != NULL) {
        /* "pid (comm) S ...": comm may hold spaces and parentheses. */
        char *close = strrchr(line, ')');
        if (close != NULL && close[1] == ' ')
            state = close[2];
    }
    fclose(f);
    return state;
}

bool nxr_test_wait_asleep(pid_t tid, bool (*pred)(void *arg), void *arg, int ms)
{
    struct timespec deadline = deadline_in(ms);
    do {
        if ((pred == NULL || pred(arg)) && nxr_test_thread_state(tid) == 'S')
            return true;
        sched_yield();
    } while (before(&deadline));
    return false;
}

int nxr_test_in_child(void (*fn)(void), char *text, size_t size)
{
    int fds[2];
    if (size == 0 || pipe(fds) != 0)
        return -1;
    fflush(NULL);
    pid_t pid = fork();
    if (pid == -1) {
        close(fds[0]);
        close(fds[1]);
        return -1;
    }
    if (pid == 0) {
        dup2(fds[1], 2);
        close(fds[0]);
        fn();
        _exit(0);
    }
    close(fds[1]);
    size_t got = 0;
    ssize_t n;
    while (got + 1 < size && (n = read(fds[0], text + got, size - 1 - got)) > 0)
        got += (size_t)n;
    text[got] = '\0';
    close(fds[0]);
    int status = -1;
    while (waitpid(pid, &status, 0) == -1 && errno == EINTR)
        ;
    return status;
}
