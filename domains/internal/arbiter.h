/*
 * The overlap arbiter: process-wide admission of work onto CPU sets (every
 * runtime of a process shares one arbiter, nxr__arbiter_process_get).
 *
 * Before a MANAGED or COOPERATIVE domain runs an operation, the runtime holds
 * a PERMIT for the domain's CPU set. The arbiter grants a permit only when its
 * set overlaps no held permit, so disjoint sets run concurrently and
 * overlapping ones never do. A request that spans several domains is ONE
 * request for the union of their sets: it is granted whole or it waits
 * holding nothing, so no lock-order deadlock between domains is possible.
 * An EXCLUSIVE permit conflicts with every other permit (for providers whose
 * threads nxr cannot confine, e.g. parallel OpenBLAS).
 *
 * Fairness policy (FIFO among overlapping requests). Requests that cannot be
 * granted at once join one queue in arrival order.
 *   - A new request is granted at once only if it overlaps neither a held
 *     permit nor ANY request already waiting. Otherwise it queues (or, for
 *     try-acquire, fails with -EBUSY).
 *   - When a permit is released or a waiter leaves (timeout), the queue is
 *     scanned in arrival order and each waiter is granted that overlaps
 *     neither the held set (including grants made earlier in this scan) nor
 *     an earlier waiter that is still waiting.
 *   - An exclusive request overlaps everything: it waits for all held
 *     permits and all earlier waiters, and everything behind it waits for it.
 *   - A later request disjoint from everything held and waiting may pass the
 *     queue; it never delays anyone it could conflict with.
 * No starvation: a waiter W is blocked only by held permits and by EARLIER
 * overlapping waiters; every request arriving after W that overlaps W queues
 * behind it. If every permit is eventually released, the earlier waiters are
 * granted (induction on queue position), then W. While W waits, at most one
 * grant per earlier overlapping waiter can happen on W's CPUs.
 *
 * Requests are PREPARED once (nxr__arbiter_request_init: the hwloc bitmap
 * becomes a compact word array), so acquire and release do no allocation and
 * no hwloc call. Permits are not re-entrant: a thread that requests a set
 * overlapping one it holds waits for itself forever, so callers must reject
 * nested entry before they get here (docs/contracts.md, "Arbitration and
 * admission": permits are not re-entrant; the nesting rules refuse it).
 *
 * Concurrency: create and destroy need exclusive use of the arbiter; every
 * other function may be called from any thread at any time (request_init
 * and fini read only the arbiter's immutable universe). One internal mutex
 * guards the state; a waiter spins at most SPIN_ITERATIONS (256) pause
 * instructions, a few microseconds, without the mutex, then sleeps on a
 * condition variable in its own stack frame. The mutex is a leaf lock: no
 * other nxr lock is taken and no caller code runs under it.
 */
#ifndef NXR_INTERNAL_ARBITER_H
#define NXR_INTERNAL_ARBITER_H

#include <hwloc.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct nxr__arbiter;

/* Requests whose CPUs lie within this many 64-bit words (256 consecutive CPU
 * ids) keep their words inline; wider ones use one heap array. */
#define NXR__ARBITER_INLINE_WORDS 4

/*
 * A prepared request: the CPU set as a word array covering only the words
 * from its lowest to its highest CPU. Caller storage; read-only once
 * initialised, so one request may be used by many threads at once (each
 * acquire is its own permit). A copy by value is the same request (it
 * shares any heap words): finalise exactly one of the copies.
 */
struct nxr__arbiter_request {
    const struct nxr__arbiter *owner; /* NULL when not initialised */
    unsigned first;                   /* word index of words[0] (CPU id / 64) */
    unsigned count;                   /* words, >= 1 */
    uint64_t *heap;                   /* the words when count > INLINE_WORDS */
    uint64_t inline_words[NXR__ARBITER_INLINE_WORDS];
};

/* Counters and a snapshot of the current state (nxr__arbiter_stats). */
struct nxr__arbiter_stats {
    uint64_t grants;            /* permits granted, exclusive included */
    uint64_t exclusive_grants;  /* of which exclusive */
    uint64_t waits;             /* requests that had to queue */
    uint64_t busy;              /* try-acquires refused with -EBUSY */
    uint64_t timeouts;          /* timed acquires that returned -ETIMEDOUT */
    uint64_t max_wait_ns;       /* longest time one request spent queued */
    uint64_t total_wait_ns;     /* sum over all queued requests */
    unsigned holders;           /* permits held now (non-exclusive) */
    unsigned waiters;           /* requests queued now, exclusive included */
    unsigned exclusive_waiters; /* exclusive requests queued now */
    bool exclusive_held;        /* the exclusive permit is held now */
};

/*
 * One arbiter per process (domains/process_arbiter.c). Every runtime takes
 * its permits from the process's arbiter, so permits exclude each other
 * across runtimes as they do within one: overlapping domains of two runtimes
 * never run at once, disjoint ones run concurrently, and the exclusive
 * permit is exclusive in the whole process. Its universe is every CPU id
 * 0..NXR_CPU_ID_MAX. get returns it (creating it for the first caller) with
 * one more reference: 0 and *out, -EINVAL (NULL out) or -ENOMEM (*out NULL).
 * put drops a reference; the last one destroys it (no permit may be held
 * then). Any thread; both take a process-wide mutex briefly, never while a
 * permit is being acquired.
 */
int nxr__arbiter_process_get(struct nxr__arbiter **out);
void nxr__arbiter_process_put(struct nxr__arbiter *a);

/*
 * Creates an arbiter for CPU ids in `universe` (normally the process's
 * allowed set; copied). Word arrays are sized from the universe's last CPU.
 * Returns 0; -EINVAL when out or universe is NULL, the universe is empty,
 * infinite or has a CPU above NXR_CPU_ID_MAX; -ENOMEM. *out is NULL on
 * failure. Not thread-safe with respect to the new arbiter (publish it after).
 */
int nxr__arbiter_create(struct nxr__arbiter **out, hwloc_const_bitmap_t universe);

/* Frees the arbiter. NULL is a no-op. No permit may be held and no thread
 * may be waiting or calling into it (checked in NXR_CHECKED builds). */
void nxr__arbiter_destroy(struct nxr__arbiter *a);

/*
 * Prepares a request for `cpus` on arbiter a. Returns 0; -EINVAL when r, a
 * or cpus is NULL, cpus is empty, or cpus has a CPU outside a's universe;
 * -ENOMEM (only when the CPUs span more than NXR__ARBITER_INLINE_WORDS
 * words). On failure r is left finalised (fini is a safe no-op). The request
 * must not outlive a. Allocates at most once; call it outside hot paths.
 */
int nxr__arbiter_request_init(struct nxr__arbiter_request *r, const struct nxr__arbiter *a,
                              hwloc_const_bitmap_t cpus);

/*
 * Prepares ONE request for the union of n sets (a multi-domain entry).
 * Same errors as nxr__arbiter_request_init; also -EINVAL when sets is NULL,
 * n is 0, any set is NULL or outside the universe, or the union is empty
 * (empty members are allowed).
 */
int nxr__arbiter_request_init_union(struct nxr__arbiter_request *r, const struct nxr__arbiter *a,
                                    const hwloc_const_bitmap_t *sets, size_t n);

/* Frees what init allocated and marks r unusable. NULL or an already
 * finalised request is a no-op. r must not be held or being acquired. */
void nxr__arbiter_request_fini(struct nxr__arbiter_request *r);

/*
 * Blocks until a permit for r's set is granted (policy above). Returns 0, or
 * -EINVAL when a or r is NULL or r was not prepared for a. No allocation;
 * waits without the mutex, spinning briefly and then sleeping.
 */
int nxr__arbiter_acquire(struct nxr__arbiter *a, const struct nxr__arbiter_request *r);

/*
 * As acquire (the same queue position, the same bound), and, when the
 * wait is still going at report_at_ns (CLOCK_MONOTONIC; 0: never), calls
 * report(arg, waited so far) once on the waiting thread, without the
 * arbiter's mutex, then goes on waiting. The report may call
 * nxr__arbiter_stats; it must not acquire or release a permit.
 */
int nxr__arbiter_acquire_reporting(struct nxr__arbiter *a, const struct nxr__arbiter_request *r,
                                   uint64_t report_at_ns,
                                   void (*report)(void *arg, uint64_t waited_ns), void *arg);

/* Grants the permit only if the policy grants it at once: 0, or -EBUSY when
 * it overlaps a held permit or a waiting request. Never queues or blocks.
 * -EINVAL as for acquire. */
int nxr__arbiter_try_acquire(struct nxr__arbiter *a, const struct nxr__arbiter_request *r);

/*
 * As acquire, but gives up after timeout_ns (CLOCK_MONOTONIC): -ETIMEDOUT,
 * having left the queue and holding nothing; requests queued behind it that
 * it was blocking are granted then. A timeout of 0 never queues (-ETIMEDOUT
 * when not grantable at once). A permit granted at the deadline is kept and
 * 0 returned. -EINVAL as for acquire.
 */
int nxr__arbiter_acquire_timed(struct nxr__arbiter *a, const struct nxr__arbiter_request *r,
                               uint64_t timeout_ns);

/*
 * Releases a permit granted for r (the same request, or a copy of it) and
 * grants the waiters this unblocks. O(words of r) when no waiter can be
 * affected, otherwise O(waiters x words). Never blocks beyond the mutex.
 * Aborts (always on, with a message) when a or r is NULL or r was not
 * prepared for a: its words could lie outside the arbiter's arrays.
 * Releasing a permit that is not held is a caller bug, caught in
 * NXR_CHECKED builds.
 */
void nxr__arbiter_release(struct nxr__arbiter *a, const struct nxr__arbiter_request *r);

/*
 * True when a queued request overlaps r's set (an exclusive request overlaps
 * every set). Admission asks this before letting a new operation join a
 * permit its domain already holds: joining while such a waiter is queued
 * would extend the permit past it without bound. O(words of r) under the
 * mutex; no lock at all when nothing is queued. Any thread; r must be
 * prepared for a. The answer may be stale by the time it is used, so it is a
 * policy input, never a safety one (overlap is enforced by grants alone).
 */
bool nxr__arbiter_contended(struct nxr__arbiter *a, const struct nxr__arbiter_request *r);

/* The exclusive permit: conflicts with every permit, exclusive or not.
 * Same waiting policy, results and errors as the non-exclusive calls
 * (-EINVAL when a is NULL). */
int nxr__arbiter_acquire_exclusive(struct nxr__arbiter *a);
/* As nxr__arbiter_acquire_reporting, for the exclusive permit. */
int nxr__arbiter_acquire_exclusive_reporting(struct nxr__arbiter *a, uint64_t report_at_ns,
                                             void (*report)(void *arg, uint64_t waited_ns),
                                             void *arg);
int nxr__arbiter_try_acquire_exclusive(struct nxr__arbiter *a);
int nxr__arbiter_acquire_exclusive_timed(struct nxr__arbiter *a, uint64_t timeout_ns);
void nxr__arbiter_release_exclusive(struct nxr__arbiter *a);

/* Instrumentation: copies the counters and the current state into *out
 * (zeroes when a is NULL). Takes the mutex briefly; any thread. */
void nxr__arbiter_stats(struct nxr__arbiter *a, struct nxr__arbiter_stats *out);

/*
 * Instrumentation: the union of held non-exclusive permits into `held` and
 * the union of queued non-exclusive requests into `waiting` (either may be
 * NULL). A consistent snapshot (taken under the mutex). 0, -EINVAL when a
 * is NULL, or -ENOMEM.
 */
int nxr__arbiter_snapshot(struct nxr__arbiter *a, hwloc_bitmap_t held, hwloc_bitmap_t waiting);

#endif /* NXR_INTERNAL_ARBITER_H */
