/*
 * The rhythm of a team's regions (see internal/rhythm.h): the plan a worker
 * follows when it goes idle.
 */
#include "executor/internal/rhythm.h"

void nxr__rhythm_init(struct nxr__rhythm *r)
{
    for (unsigned i = 0; i < NXR__RHYTHM_HISTORY; i++) {
        atomic_init(&r->starts[i], 0);
        atomic_init(&r->ends[i], 0);
    }
    atomic_init(&r->late_ns, 0);
}

static uint64_t clamp_u64(uint64_t v, uint64_t lo, uint64_t hi)
{
    return v < lo ? lo : v > hi ? hi : v;
}

uint64_t nxr__rhythm_lead(const struct nxr__rhythm *r)
{
    /* Relaxed: advisory. */
    return clamp_u64(atomic_load_explicit(&r->late_ns, memory_order_relaxed) +
                         NXR__RHYTHM_LEAD_PAD_NS,
                     NXR__RHYTHM_LEAD_PAD_NS, NXR__RHYTHM_LEAD_MAX_NS);
}

static void sort7(uint64_t *d, unsigned n)
{
    for (unsigned i = 1; i < n; i++) { /* insertion sort: seven values */
        uint64_t v = d[i];
        unsigned j = i;
        for (; j > 0 && d[j - 1] > v; j--)
            d[j] = d[j - 1];
        d[j] = v;
    }
}

bool nxr__rhythm_short(const struct nxr__rhythm *r, uint32_t gen)
{
    enum { H = NXR__RHYTHM_HISTORY, N = NXR__RHYTHM_HISTORY - 1 };
    if (gen < H)
        return false;
    uint64_t d[N];
    for (unsigned i = 0; i < N; i++) {
        unsigned k = (uint32_t)(gen - 1 - i) % H;
        /* Relaxed: advisory (a torn pair fails the check). */
        uint64_t s = atomic_load_explicit(&r->starts[k], memory_order_relaxed);
        uint64_t e = atomic_load_explicit(&r->ends[k], memory_order_relaxed);
        if (s == 0 || e < s)
            return false;
        d[i] = e - s;
    }
    sort7(d, N);
    return d[N / 2] < NXR__RHYTHM_WAKE_WORTH_NS;
}

void nxr__rhythm_plan(const struct nxr__rhythm *r, uint32_t gen, uint64_t now, unsigned missed,
                      struct nxr__idle_plan *plan)
{
    plan->sleep_until = 0;
    plan->spin_until = now + NXR__RHYTHM_FALLBACK_SPIN_NS;
    plan->expected = UINT64_MAX;
    plan->predicted = false;
    plan->end_known = true;
    if (gen < NXR__RHYTHM_HISTORY)
        return; /* no history yet */
    enum { H = NXR__RHYTHM_HISTORY, N = NXR__RHYTHM_HISTORY - 1 };
    uint64_t s[H], e[H], d[N], dur[N];
    for (unsigned i = 0; i < H; i++) {
        /* Relaxed: advisory; a torn ring fails the order checks below. */
        unsigned k = (uint32_t)(gen - i) % H;
        s[i] = atomic_load_explicit(&r->starts[k], memory_order_relaxed);
        e[i] = atomic_load_explicit(&r->ends[k], memory_order_relaxed);
    }
    /* Gap i: from the end of region gen - i - 1 to the publish of gen - i. */
    for (unsigned i = 0; i < N; i++) {
        if (s[i + 1] == 0 || e[i + 1] < s[i + 1] || s[i] < e[i + 1])
            return; /* overwritten meanwhile, or not filled: no rhythm */
        d[i] = s[i] - e[i + 1];
        dur[i] = e[i + 1] - s[i + 1];
    }
    sort7(d, N);
    sort7(dur, N);
    const uint64_t gap = d[N / 2];
    if (gap > NXR__RHYTHM_GAP_MAX_NS)
        return;
    /* The spread of the middle gaps (robust to one outlier each side)
     * widens the window the worker spins in around the predicted publish. */
    const uint64_t margin = clamp_u64(NXR__RHYTHM_MARGIN_MIN_NS + (d[N - 2] - d[1]),
                                      NXR__RHYTHM_MARGIN_MIN_NS, NXR__RHYTHM_MARGIN_MAX_NS);
    uint64_t end = e[0];
    if (end < s[0] || end > now) { /* not stamped yet: the caller still runs */
        end = now;
        plan->end_known = false;
    }
    /* After `missed` predicted publishes that did not come: the one after
     * them, as if the stream had skipped a beat (a preempted caller). */
    const uint64_t next = end + gap + (uint64_t)missed * (dur[N / 2] + gap);
    plan->predicted = true;
    plan->expected = next;
    const uint64_t lead = nxr__rhythm_lead(r);
    uint64_t window = margin;
    if (next > now + lead + NXR__RHYTHM_SLEEP_MIN_NS)
        plan->sleep_until = next - lead;
    else if (window < NXR__RHYTHM_THROUGH_MARGIN_NS)
        window = NXR__RHYTHM_THROUGH_MARGIN_NS;
    /* Past the predicted publish already: one window more, then park; the
     * stream may have stopped. */
    plan->spin_until = (next > now ? next : now) + window;
}

void nxr__rhythm_woke(struct nxr__rhythm *r, uint64_t deadline, uint64_t now)
{
    if (now <= deadline)
        return; /* woken before the deadline: says nothing about lateness */
    uint64_t late = now - deadline;
    if (late > NXR__RHYTHM_LEAD_MAX_NS)
        late = NXR__RHYTHM_LEAD_MAX_NS;
    /* Relaxed load and store: two workers updating at once lose one
     * sample, which is harmless. All the way up at once (a worker that
     * wakes after its region started has missed it), an eighth of the way
     * down per sample: a high percentile of the lateness, not its mean. */
    uint64_t old = atomic_load_explicit(&r->late_ns, memory_order_relaxed);
    uint64_t next = late >= old ? late : old - (old - late) / 8;
    atomic_store_explicit(&r->late_ns, next, memory_order_relaxed);
}
