/* Test support: CPU ids from the allowed set (see cpus.h). */
#include "tests/support/cpus.h"

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>

#define MAX_CPUS 1024

static pthread_once_t once = PTHREAD_ONCE_INIT;
static int allowed[MAX_CPUS];
static int nallowed;

static void load(void)
{
    cpu_set_t set;
    CPU_ZERO(&set);
    /* pid 0 is the calling thread; read before any test narrows it (the
     * first call comes from the test's own start, or a constructor). */
    if (sched_getaffinity(0, sizeof(set), &set) != 0)
        return;
    for (int cpu = 0; cpu < CPU_SETSIZE && nallowed < MAX_CPUS; cpu++) {
        if (CPU_ISSET(cpu, &set))
            allowed[nallowed++] = cpu;
    }
}

/* Read at start-up, so that a test that pins its main thread first still
 * sees the process's set. */
__attribute__((constructor)) static void load_early(void)
{
    pthread_once(&once, load);
}

int nxr_test_cpu_count(void)
{
    pthread_once(&once, load);
    return nallowed;
}

int nxr_test_cpu(int k)
{
    pthread_once(&once, load);
    return k >= 0 && k < nallowed ? allowed[k] : -1;
}

hwloc_bitmap_t nxr_test_cpus(int k, int n)
{
    if (k < 0 || n < 0 || k + n > nxr_test_cpu_count())
        return NULL;
    hwloc_bitmap_t set = hwloc_bitmap_alloc();
    if (set == NULL)
        return NULL;
    for (int i = k; i < k + n; i++)
        hwloc_bitmap_set(set, (unsigned)allowed[i]);
    return set;
}

int nxr_test_cpus_needed(const char *tmpl)
{
    int need = 0;
    for (const char *p = tmpl; *p != '\0'; p++) {
        if (p[0] != '%')
            continue;
        if (p[1] >= '0' && p[1] <= '9' && p[1] - '0' + 1 > need)
            need = p[1] - '0' + 1;
        else if (p[1] == '*' && need < 1)
            need = 1;
    }
    return need;
}

static int append(char *out, size_t size, size_t *len, const char *fmt, int a, int b)
{
    int n = snprintf(out + *len, size - *len, fmt, a, b);
    if (n < 0 || (size_t)n >= size - *len)
        return -1;
    *len += (size_t)n;
    return 0;
}

/* The allowed set as a cpulist ("1,3-5"). */
static int append_all(char *out, size_t size, size_t *len)
{
    for (int i = 0; i < nallowed;) {
        int j = i;
        while (j + 1 < nallowed && allowed[j + 1] == allowed[j] + 1)
            j++;
        const char *fmt = i == j ? "%s%d" : "%s%d-%d";
        char sep[2] = {i == 0 ? '\0' : ',', '\0'};
        int n = i == j ? snprintf(out + *len, size - *len, fmt, sep, allowed[i])
                       : snprintf(out + *len, size - *len, fmt, sep, allowed[i], allowed[j]);
        if (n < 0 || (size_t)n >= size - *len)
            return -1;
        *len += (size_t)n;
        i = j + 1;
    }
    return 0;
}

const char *nxr_test_expand(const char *tmpl)
{
    static char ring[16][512];
    static unsigned next;
    if (tmpl == NULL || nxr_test_cpus_needed(tmpl) > nxr_test_cpu_count())
        return NULL;
    char *out = ring[next++ % 16];
    size_t len = 0;
    out[0] = '\0';
    for (const char *p = tmpl; *p != '\0'; p++) {
        int rc;
        if (p[0] == '%' && p[1] >= '0' && p[1] <= '9') {
            rc = append(out, sizeof(ring[0]), &len, "%d", allowed[p[1] - '0'], 0);
            p++;
        } else if (p[0] == '%' && p[1] == '*') {
            rc = append_all(out, sizeof(ring[0]), &len);
            p++;
        } else {
            rc = append(out, sizeof(ring[0]), &len, "%c", *p, 0);
        }
        if (rc != 0)
            return NULL;
    }
    return out;
}

int nxr_test_pin(hwloc_const_bitmap_t cpus)
{
    cpu_set_t set;
    CPU_ZERO(&set);
    if (cpus == NULL || hwloc_bitmap_iszero(cpus) || hwloc_bitmap_last(cpus) >= CPU_SETSIZE)
        return -EINVAL;
    int cpu;
    hwloc_bitmap_foreach_begin(cpu, cpus) CPU_SET(cpu, &set);
    hwloc_bitmap_foreach_end();
    return sched_setaffinity(0, sizeof set, &set) == 0 ? 0 : -errno;
}
