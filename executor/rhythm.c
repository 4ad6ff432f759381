/*
 * The rhythm of a team's regions (see internal/rhythm.h): the plan a worker
 * follows when it goes idle.
 */
#include "executor/internal/rhythm.h"

void nxr__rhythm_init(struct nxr__rhythm *r)
{
    for (unsigned i = 0; i < NXR__RHYTHM_HISTORY; i++)
        atomic_init(&r->starts[i], 0);
    atomic_init(&r->late_ns, 0);
}

static uint64_t clamp_u64(uint64_t v, uint64_t lo, uint64_t hi)
{
    return v < lo ? lo : v > hi ? hi : v;
}

void nxr__rhythm_plan(const struct nxr__rhythm *r, uint32_t gen, uint64_t now,
                      struct nxr__idle_plan *plan)
{
    plan->sleep_until = 0;
    plan->spin_until = now + NXR__RHYTHM_FALLBACK_SPIN_NS;
    if (gen < NXR__RHYTHM_HISTORY)
        return; /* no history yet */
    enum { H = NXR__RHYTHM_HISTORY, N = NXR__RHYTHM_HISTORY - 1 };
    uint64_t t[H], d[N];
    for (unsigned i = 0; i < H; i++) {
        /* Relaxed: advisory; a torn ring fails the order check below. */
        t[i] = atomic_load_explicit(&r->starts[(uint32_t)(gen - i) % H], memory_order_relaxed);
    }
    for (unsigned i = 0; i < N; i++) {
        if (t[i + 1] == 0 || t[i] <= t[i + 1])
            return; /* overwritten meanwhile, or not filled: no rhythm */
        d[i] = t[i] - t[i + 1];
    }
    for (unsigned i = 1; i < N; i++) { /* insertion sort: seven values */
        uint64_t v = d[i];
        unsigned j = i;
        for (; j > 0 && d[j - 1] > v; j--)
            d[j] = d[j - 1];
        d[j] = v;
    }
    const uint64_t period = d[N / 2];
    if (period > NXR__RHYTHM_PERIOD_MAX_NS)
        return;
    /* The spread of the middle intervals (robust to one outlier each side)
     * widens the window the worker spins in around the predicted publish. */
    const uint64_t margin = clamp_u64(NXR__RHYTHM_MARGIN_MIN_NS + (d[N - 2] - d[1]),
                                      NXR__RHYTHM_MARGIN_MIN_NS, NXR__RHYTHM_MARGIN_MAX_NS);
    const uint64_t next = t[0] + period;
    const uint64_t lead =
        clamp_u64(atomic_load_explicit(&r->late_ns, memory_order_relaxed) +
                      NXR__RHYTHM_LEAD_PAD_NS,
                  NXR__RHYTHM_LEAD_PAD_NS, NXR__RHYTHM_LEAD_MAX_NS);
    if (next > now + lead + NXR__RHYTHM_SLEEP_MIN_NS)
        plan->sleep_until = next - lead;
    /* Past the predicted publish already (a long region): one margin more,
     * then park; the stream may have stopped. */
    plan->spin_until = (next > now ? next : now) + margin;
}

void nxr__rhythm_woke(struct nxr__rhythm *r, uint64_t deadline, uint64_t now)
{
    if (now <= deadline)
        return; /* woken before the deadline: says nothing about lateness */
    uint64_t late = now - deadline;
    if (late > NXR__RHYTHM_LEAD_MAX_NS)
        late = NXR__RHYTHM_LEAD_MAX_NS;
    /* Relaxed load and store: a running average; two workers updating at
     * once lose one sample, which is harmless. */
    uint64_t old = atomic_load_explicit(&r->late_ns, memory_order_relaxed);
    atomic_store_explicit(&r->late_ns, (3 * old + late) / 4, memory_order_relaxed);
}
