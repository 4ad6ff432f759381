/*
 * CPU-set helpers (see internal/cpuset.h), and the public conversions
 * between glibc masks, CPU lists and bitmaps (nxr_domains.h). Masks nxr
 * allocates are sized from the highest CPU id involved, never from a fixed
 * CPU_SETSIZE, so machines with more than 1024 CPUs work.
 */
#include "domains/internal/cpuset.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "base/internal/last_error.h"
#include "base/internal/sys.h"
#include "domains/nxr_domains.h"

/* The kernel refuses masks smaller than its own nr_cpu_ids; 8192 bits is
 * larger than any Linux configuration in practice (CONFIG_NR_CPUS <= 8192). */
#define KERNEL_MASK_BITS 8192

hwloc_bitmap_t nxr__cpuset_alloc(void)
{
    return nxr__fault_hit(NXR_FAULT_ALLOC) ? NULL : hwloc_bitmap_alloc();
}

hwloc_bitmap_t nxr__cpuset_dup(hwloc_const_bitmap_t set)
{
    return nxr__fault_hit(NXR_FAULT_ALLOC) ? NULL : hwloc_bitmap_dup(set);
}

int nxr__cpumask_alloc(struct nxr__cpumask *mask, int max_cpu)
{
    int bits = max_cpu + 1 > KERNEL_MASK_BITS ? max_cpu + 1 : KERNEL_MASK_BITS;
    mask->set = NULL;
    mask->size = 0;
    if (nxr__fault_hit(NXR_FAULT_ALLOC))
        return -ENOMEM;
    mask->set = CPU_ALLOC(bits);
    if (mask->set == NULL)
        return -ENOMEM;
    mask->size = CPU_ALLOC_SIZE(bits);
    CPU_ZERO_S(mask->size, mask->set);
    return 0;
}

/* Sets the CPUs of a finite bitmap in an already zeroed mask that holds
 * them all. */
static void mask_fill(cpu_set_t *set, size_t size, hwloc_const_bitmap_t cpus)
{
    int cpu;
    hwloc_bitmap_foreach_begin(cpu, cpus) CPU_SET_S((size_t)cpu, size, set);
    hwloc_bitmap_foreach_end();
}

int nxr__cpumask_from_bitmap(struct nxr__cpumask *mask, hwloc_const_bitmap_t cpus)
{
    int rc = nxr__cpumask_alloc(mask, hwloc_bitmap_last(cpus));
    if (rc != 0)
        return rc;
    mask_fill(mask->set, mask->size, cpus);
    return 0;
}

void nxr__cpumask_free(struct nxr__cpumask *mask)
{
    if (mask->set != NULL)
        CPU_FREE(mask->set);
    mask->set = NULL;
    mask->size = 0;
}

int nxr__cpumask_to_bitmap(const struct nxr__cpumask *mask, hwloc_bitmap_t out)
{
    hwloc_bitmap_zero(out);
    size_t bits = mask->size * 8;
    for (size_t cpu = 0; cpu < bits; cpu++) {
        if (CPU_ISSET_S(cpu, mask->size, mask->set) && hwloc_bitmap_set(out, (unsigned)cpu) != 0)
            return -ENOMEM;
    }
    return 0;
}

int nxr__affinity_self(hwloc_bitmap_t out)
{
    struct nxr__cpumask mask;
    int rc = nxr__cpumask_alloc(&mask, 0);
    if (rc != 0)
        return rc;
    rc = nxr__getaffinity_self(mask.set, mask.size);
    if (rc == 0)
        rc = nxr__cpumask_to_bitmap(&mask, out);
    nxr__cpumask_free(&mask);
    return rc;
}

char *nxr__cpuset_list(hwloc_const_bitmap_t cpus, char *buf, size_t size)
{
    if (size == 0)
        return buf;
    buf[0] = '\0';
    if (hwloc_bitmap_iszero(cpus))
        return buf;
    /* hwloc's list format is the kernel's ("0-3,8"). */
    hwloc_bitmap_list_snprintf(buf, size, cpus);
    return buf;
}

int nxr_cpuset_format(hwloc_const_bitmap_t cpus, char *buf, size_t size, size_t *len)
{
    nxr__call_begin();
    if (cpus == NULL || buf == NULL || size == 0)
        return nxr__fail(-EINVAL, __func__, "%s",
                         cpus == NULL  ? "cpus is NULL"
                         : buf == NULL ? "buf is NULL"
                                       : "size is 0");
    if (hwloc_bitmap_weight(cpus) < 0)
        return nxr__fail(-EINVAL, __func__, "cpus is infinite");
    /* hwloc's list format is the kernel's; asked with no room, it only
     * measures. */
    int n = hwloc_bitmap_iszero(cpus) ? 0 : hwloc_bitmap_list_snprintf(NULL, 0, cpus);
    if (n < 0)
        return nxr__fail(-EINVAL, __func__, "hwloc cannot format cpus");
    if (len != NULL)
        *len = (size_t)n;
    if ((size_t)n >= size)
        return nxr__fail(-ENOSPC, __func__, "the list needs %d bytes, buf has %zu", n + 1, size);
    if (n == 0)
        buf[0] = '\0';
    else
        hwloc_bitmap_list_snprintf(buf, size, cpus);
    return 0;
}

/* glibc's CPU_*_S macros read and write whole words (unsigned long), as
 * the kernel's affinity calls do, so a mask is a whole number of them. */
static bool mask_size_ok(const cpu_set_t *set, size_t setsize)
{
    return set != NULL && setsize != 0 && setsize % sizeof(unsigned long) == 0;
}

int nxr_cpuset_from_cpu_set(const cpu_set_t *set, size_t setsize, hwloc_bitmap_t *out)
{
    nxr__call_begin();
    if (out != NULL)
        *out = NULL;
    if (out == NULL || !mask_size_ok(set, setsize))
        return nxr__fail(-EINVAL, __func__, "%s",
                         out == NULL   ? "out is NULL"
                         : set == NULL ? "set is NULL"
                                       : "setsize is not a whole number of unsigned longs");
    hwloc_bitmap_t cpus = nxr__cpuset_alloc();
    if (cpus == NULL)
        return nxr__fail(-ENOMEM, __func__, "out of memory");
    /* Only read through: nxr__cpumask_to_bitmap never writes the mask. */
    const struct nxr__cpumask mask = {.set = (cpu_set_t *)set, .size = setsize};
    int rc = nxr__cpumask_to_bitmap(&mask, cpus);
    if (rc != 0) {
        hwloc_bitmap_free(cpus);
        return nxr__fail(rc, __func__, "set: %s", nxr_strerror(rc));
    }
    *out = cpus;
    return 0;
}

int nxr_cpuset_to_cpu_set(hwloc_const_bitmap_t cpus, cpu_set_t *set, size_t setsize)
{
    nxr__call_begin();
    if (cpus == NULL || !mask_size_ok(set, setsize))
        return nxr__fail(-EINVAL, __func__, "%s",
                         cpus == NULL  ? "cpus is NULL"
                         : set == NULL ? "set is NULL"
                                       : "setsize is not a whole number of unsigned longs");
    /* Checked before the mask is touched: a failure leaves it as it was.
     * hwloc_bitmap_last is -1 for the empty set (and for an infinite one,
     * which the weight tells apart). */
    int last = hwloc_bitmap_last(cpus);
    if (hwloc_bitmap_weight(cpus) < 0 || (last >= 0 && (size_t)last >= setsize * 8))
        return nxr__fail(-ERANGE, __func__, "cpus reaches CPU %d, a mask of %zu bytes ends at %zu",
                         last, setsize, setsize * 8 - 1);
    CPU_ZERO_S(setsize, set);
    mask_fill(set, setsize, cpus);
    return 0;
}
