/*
 * Runtime options and the environment: the one place where NXR_* variables
 * are read. Options set in the struct win over the environment.
 */
#include <errno.h>
#include <limits.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/internal/number.h"
#include "runtime/internal/runtime.h"

void nxr_runtime_opts_init(struct nxr_runtime_opts *opts)
{
    memset(opts, 0, sizeof(*opts));
}

/*
 * Every NXR_* variable nxr knows: the settings read below, and the names
 * others in this project read (the Python binding's NXR_LIBRARY). The
 * project's own test and CI harness uses the prefixes in harness_prefixes.
 * Anything else that starts with NXR_ is most likely a typo, which would
 * otherwise be ignored without a word: warned of once per process.
 */
static const char *const known_names[] = {
    "NXR_TOPOLOGY", "NXR_DOMAINS",         "NXR_NUM_THREADS",     "NXR_CPU_QUOTA", "NXR_PEERS",
    "NXR_SPIN",     "NXR_STALL_REPORT_MS", "NXR_PROVIDER_POLICY", "NXR_GEMM",      "NXR_POOL_CAP",
    "NXR_ROUTE",    "NXR_AFFINITY",        "NXR_DISPLAY_ENV",     "NXR_LIBRARY",   "NXR_HUGEPAGES",
    "NXR_QUOTA_FOLLOW_MS",
};
static const char *const harness_prefixes[] = {"NXR_TEST_", "NXR_CI_", "NXR_SOAK_"};

static const char *env(const struct nxr_runtime_opts *opts, const char *name)
{
    if (opts->ignore_env)
        return NULL;
    const char *v = getenv(name);
    return v != NULL && v[0] != '\0' ? v : NULL;
}

/* Edit distance between two short names (insert, delete, replace). */
static size_t distance(const char *a, size_t la, const char *b)
{
    size_t lb = strlen(b), row[64];
    if (la >= 63 || lb >= 63)
        return SIZE_MAX;
    for (size_t j = 0; j <= lb; j++)
        row[j] = j;
    for (size_t i = 1; i <= la; i++) {
        size_t diag = row[0];
        row[0] = i;
        for (size_t j = 1; j <= lb; j++) {
            size_t up = row[j];
            size_t best = diag + (a[i - 1] != b[j - 1]);
            if (up + 1 < best)
                best = up + 1;
            if (row[j - 1] + 1 < best)
                best = row[j - 1] + 1;
            row[j] = best;
            diag = up;
        }
    }
    return row[lb];
}

static bool known(const char *name, size_t len)
{
    for (size_t i = 0; i < sizeof(known_names) / sizeof(known_names[0]); i++)
        if (strlen(known_names[i]) == len && strncmp(name, known_names[i], len) == 0)
            return true;
    for (size_t i = 0; i < sizeof(harness_prefixes) / sizeof(harness_prefixes[0]); i++)
        if (strncmp(name, harness_prefixes[i], strlen(harness_prefixes[i])) == 0)
            return true;
    return false;
}

/* Says, once per process, which NXR_* variables nxr does not know. */
static void warn_unknown_names(void)
{
    static atomic_bool warned;
    if (atomic_exchange_explicit(&warned, true, memory_order_relaxed))
        return;
    for (char **e = environ; e != NULL && *e != NULL; e++) {
        const char *eq = strchr(*e, '=');
        size_t len = eq != NULL ? (size_t)(eq - *e) : strlen(*e);
        if (strncmp(*e, "NXR_", 4) != 0 || known(*e, len))
            continue;
        const char *closest = NULL;
        size_t best = 4; /* suggest only a name at most 3 edits away */
        for (size_t i = 0; i < sizeof(known_names) / sizeof(known_names[0]); i++) {
            size_t d = distance(*e, len, known_names[i]);
            if (d < best) {
                best = d;
                closest = known_names[i];
            }
        }
        fprintf(stderr, "nxr: warning: %.*s is not an nxr setting and is ignored%s%s%s\n",
                (int)(len > 64 ? 64 : len), *e, closest != NULL ? " (did you mean " : "",
                closest != NULL ? closest : "", closest != NULL ? "?)" : "");
    }
}

/* A whole decimal number in [0, max], digits only (no sign, no spaces);
 * anything else is NXR_ESYNTAX. */
static int env_uint(const char *name, const char *value, unsigned max, unsigned *out, char *err,
                    size_t errsz)
{
    unsigned long long v;
    long n = nxr__parse_digits(value, 10, max, &v);
    if (n <= 0 || value[n] != '\0') {
        snprintf(err, errsz, "%s='%s': expected a whole number from 0 to %u", name, value, max);
        return NXR_ESYNTAX;
    }
    *out = (unsigned)v;
    return 0;
}

/* A byte count, digits only, with an optional K, M or G suffix (powers of
 * 1024), below SIZE_MAX. */
static int env_bytes(const char *name, const char *value, size_t *out, char *err, size_t errsz)
{
    unsigned long long v = 0;
    long n = nxr__parse_digits(value, 10, SIZE_MAX - 1, &v);
    const char *end = value + (n > 0 ? n : 0);
    unsigned shift = 0;
    if (n > 0 && (*end == 'K' || *end == 'M' || *end == 'G')) {
        shift = *end == 'K' ? 10 : *end == 'M' ? 20 : 30;
        end++;
    }
    if (n <= 0 || *end != '\0' || v > (SIZE_MAX >> shift) - 1) {
        snprintf(err, errsz, "%s='%s': expected bytes (digits), optionally with K, M or G", name,
                 value);
        return NXR_ESYNTAX;
    }
    *out = (size_t)v << shift;
    return 0;
}

/* The documented spellings of a switch: 1/true/yes/on and 0/false/no/off. */
static int env_bool(const char *name, const char *value, bool *out, char *err, size_t errsz)
{
    static const char *const on[] = {"1", "true", "yes", "on"};
    static const char *const off[] = {"0", "false", "no", "off"};
    for (size_t i = 0; i < sizeof(on) / sizeof(on[0]); i++) {
        if (strcmp(value, on[i]) == 0) {
            *out = true;
            return 0;
        }
        if (strcmp(value, off[i]) == 0) {
            *out = false;
            return 0;
        }
    }
    snprintf(err, errsz, "%s='%s': expected 1, true, yes or on, or 0, false, no or off", name,
             value);
    return NXR_ESYNTAX;
}

int nxr__settings_resolve(struct nxr__settings *s, const struct nxr_runtime_opts *opts, char *err,
                          size_t errsz)
{
    memset(s, 0, sizeof(*s));
    if (opts->domains != NULL && opts->domain_decls != NULL) {
        snprintf(err, errsz, "set either opts.domains or opts.domain_decls, not both");
        return -EINVAL;
    }
    if (opts->num_threads < 0 || opts->spin < NXR_SPIN_NONE) {
        snprintf(err, errsz, "opts.num_threads must be >= 0 and opts.spin >= NXR_SPIN_NONE (-1)");
        return -EINVAL;
    }
    if (opts->stall_report_ms < NXR_STALL_REPORT_OFF) {
        snprintf(err, errsz,
                 "opts.stall_report_ms must be >= NXR_STALL_REPORT_OFF (-1; 0: "
                 "NXR_STALL_REPORT_MS)");
        return -EINVAL;
    }
    s->topology = opts->topology != NULL ? opts->topology : env(opts, "NXR_TOPOLOGY");
    s->domains = opts->domains;
    if (s->domains == NULL && opts->domain_decls == NULL)
        s->domains = env(opts, "NXR_DOMAINS");

    int rc;
    const char *v;
    s->num_threads = (unsigned)opts->num_threads;
    if (s->num_threads == 0 && (v = env(opts, "NXR_NUM_THREADS")) != NULL &&
        (rc = env_uint("NXR_NUM_THREADS", v, INT_MAX, &s->num_threads, err, errsz)) != 0)
        return rc;
    if (opts->cpu_quota < NXR_CPU_QUOTA_IGNORE) {
        snprintf(err, errsz,
                 "opts.cpu_quota %d: expected 0 (unset), NXR_CPU_QUOTA_AUTO (-1), "
                 "NXR_CPU_QUOTA_IGNORE (-2) or a CPU count",
                 opts->cpu_quota);
        return -EINVAL;
    }
    s->cpu_quota = opts->cpu_quota;
    snprintf(s->cpu_quota_from, sizeof(s->cpu_quota_from), "opts.cpu_quota=%d", opts->cpu_quota);
    if (s->cpu_quota == 0) {
        s->cpu_quota = NXR_CPU_QUOTA_AUTO;
        if ((v = env(opts, "NXR_CPU_QUOTA")) != NULL) {
            unsigned n = 0;
            if (strcmp(v, "ignore") == 0)
                s->cpu_quota = NXR_CPU_QUOTA_IGNORE;
            else if (strcmp(v, "auto") != 0) {
                if (env_uint("NXR_CPU_QUOTA", v, 1u << 20, &n, err, errsz) != 0 || n == 0) {
                    snprintf(err, errsz,
                             "NXR_CPU_QUOTA='%s': expected 'auto', 'ignore' or a CPU count "
                             "from 1 to %u",
                             v, 1u << 20);
                    return NXR_ESYNTAX;
                }
                s->cpu_quota = (int)n;
            }
            snprintf(s->cpu_quota_from, sizeof(s->cpu_quota_from), "NXR_CPU_QUOTA=%.20s", v);
        }
    }
    s->cgroup_root = opts->cgroup_root;
    s->peers_dir = opts->peers_dir;
    if (s->peers_dir != NULL && strlen(s->peers_dir) > NXR__PEERS_DIR_MAX) {
        snprintf(err, errsz, "opts.peers_dir is %zu bytes long: at most %d", strlen(s->peers_dir),
                 NXR__PEERS_DIR_MAX);
        return -ENAMETOOLONG;
    }
    if ((int)opts->peers < NXR_PEERS_DEFAULT || (int)opts->peers > NXR_PEERS_OFF) {
        snprintf(err, errsz,
                 "opts.peers %d: expected NXR_PEERS_DEFAULT (0), NXR_PEERS_WARN, _QUIET "
                 "or _OFF",
                 (int)opts->peers);
        return -EINVAL;
    }
    s->peers = opts->peers;
    if (s->peers == NXR_PEERS_DEFAULT)
        s->peers = opts->ignore_env ? NXR_PEERS_OFF : NXR_PEERS_WARN;
    if (opts->peers == NXR_PEERS_DEFAULT && (v = env(opts, "NXR_PEERS")) != NULL) {
        if (strcmp(v, "warn") == 0)
            s->peers = NXR_PEERS_WARN;
        else if (strcmp(v, "quiet") == 0)
            s->peers = NXR_PEERS_QUIET;
        else if (strcmp(v, "off") == 0)
            s->peers = NXR_PEERS_OFF;
        else {
            snprintf(err, errsz, "NXR_PEERS='%s': expected 'warn', 'quiet' or 'off'", v);
            return NXR_ESYNTAX;
        }
    }
    s->spin = NXR_SPIN_DEFAULT;
    if (opts->spin == NXR_SPIN_NONE)
        s->spin = 0;
    else if (opts->spin > 0)
        s->spin = (unsigned)opts->spin;
    else if ((v = env(opts, "NXR_SPIN")) != NULL &&
             (rc = env_uint("NXR_SPIN", v, INT_MAX, &s->spin, err, errsz)) != 0)
        return rc;
    s->stall_ms = NXR__STALL_DEFAULT_MS;
    if (opts->stall_report_ms == NXR_STALL_REPORT_OFF)
        s->stall_ms = 0;
    else if (opts->stall_report_ms > 0)
        s->stall_ms = (unsigned)opts->stall_report_ms;
    else if ((v = env(opts, "NXR_STALL_REPORT_MS")) != NULL &&
             (rc = env_uint("NXR_STALL_REPORT_MS", v, INT_MAX, &s->stall_ms, err, errsz)) != 0)
        return rc;
    /* Off unless asked (runtime/budget.c): it is a thread of its own. */
    s->quota_follow_ms = 0;
    if ((v = env(opts, "NXR_QUOTA_FOLLOW_MS")) != NULL &&
        (rc = env_uint("NXR_QUOTA_FOLLOW_MS", v, 3600000u, &s->quota_follow_ms, err, errsz)) != 0)
        return rc;
    s->policy = NXR_PROVIDER_STRICT;
    if ((int)opts->provider_policy < 0 ||
        (int)opts->provider_policy > NXR_PROVIDER_PROCESS_EXCLUSIVE) {
        snprintf(err, errsz, "opts.provider_policy %d is not a policy", (int)opts->provider_policy);
        return -EINVAL;
    }
    if (opts->provider_policy != NXR_PROVIDER_POLICY_DEFAULT) {
        s->policy = (enum nxr_provider_policy)opts->provider_policy;
    } else if ((v = env(opts, "NXR_PROVIDER_POLICY")) != NULL) {
        if (strcmp(v, "exclusive") == 0)
            s->policy = NXR_PROVIDER_PROCESS_EXCLUSIVE;
        else if (strcmp(v, "strict") != 0) {
            snprintf(err, errsz, "NXR_PROVIDER_POLICY='%s': expected 'strict' or 'exclusive'", v);
            return NXR_ESYNTAX;
        }
    }
    s->gemm_openblas = false;
    if ((v = env(opts, "NXR_GEMM")) != NULL) {
        if (strcmp(v, "openblas") == 0)
            s->gemm_openblas = true;
        else if (strcmp(v, "native") != 0) {
            snprintf(err, errsz, "NXR_GEMM='%s': expected 'native' or 'openblas'", v);
            return NXR_ESYNTAX;
        }
    }
    s->pool_cap = NXR_POOL_DEFAULT_CAP;
    if (opts->has_pool_cap)
        s->pool_cap = opts->pool_cap;
    else if ((v = env(opts, "NXR_POOL_CAP")) != NULL &&
             (rc = env_bytes("NXR_POOL_CAP", v, &s->pool_cap, err, errsz)) != 0)
        return rc;
    s->route = NXR_ROUTE_MOST_BYTES;
    if ((int)opts->route_policy < 0 || (int)opts->route_policy > NXR_ROUTE_SINGLE_DOMAIN) {
        snprintf(err, errsz, "opts.route_policy %d is not a policy", (int)opts->route_policy);
        return -EINVAL;
    }
    /* NXR_AFFINITY is 0.x's name for NXR_ROUTE, read for one release. */
    const char *route_var = "NXR_ROUTE";
    if (opts->route_policy != NXR_ROUTE_DEFAULT) {
        s->route = opts->route_policy;
    } else if ((v = env(opts, "NXR_ROUTE")) != NULL ||
               (v = env(opts, route_var = "NXR_AFFINITY")) != NULL) {
        if (strcmp(route_var, "NXR_AFFINITY") == 0)
            fprintf(stderr, "NXR: NXR_AFFINITY is deprecated; it is now called NXR_ROUTE\n");
        if (strcmp(v, "single-domain") == 0)
            s->route = NXR_ROUTE_SINGLE_DOMAIN;
        else if (strcmp(v, "most-bytes") != 0) {
            snprintf(err, errsz, "%s='%s': expected 'most-bytes' or 'single-domain'", route_var, v);
            return NXR_ESYNTAX;
        }
    }
    /* Huge pages for packed weights: on unless NXR_HUGEPAGES says off (the
     * system's THP mode still decides whether the advice gives any). */
    s->huge_pages = true;
    if ((v = env(opts, "NXR_HUGEPAGES")) != NULL &&
        (rc = env_bool("NXR_HUGEPAGES", v, &s->huge_pages, err, errsz)) != 0)
        return rc;
    s->display_env = false;
    if ((v = env(opts, "NXR_DISPLAY_ENV")) != NULL &&
        (rc = env_bool("NXR_DISPLAY_ENV", v, &s->display_env, err, errsz)) != 0)
        return rc;
    if (!opts->ignore_env)
        warn_unknown_names();
    return 0;
}
