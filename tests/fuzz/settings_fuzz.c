/*
 * libFuzzer target: the environment and option parsing of runtime creation
 * (nxr__settings_resolve): NXR_TOPOLOGY, NXR_DOMAINS, NXR_NUM_THREADS,
 * NXR_SPIN, NXR_PROVIDER_POLICY, NXR_GEMM, NXR_DISPLAY_ENV, and the option
 * fields that override them. The input is the seven values separated by
 * newlines (a missing one is unset), preceded by one byte that picks the
 * option fields.
 *
 * Properties: the result is 0, NXR_ESYNTAX or -EINVAL, and exactly the one a
 * reference model of the documented rules predicts (numbers are whole
 * decimal numbers from 0 to INT_MAX; the policy is "strict" or "exclusive";
 * GEMM "native" or "openblas"; options win over the environment); on
 * success every setting equals the model's. A NXR_DOMAINS value also goes
 * through the parser. Built and run by tools/fuzz.sh.
 */
#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "domains/internal/plan.h"
#include "runtime/internal/runtime.h"

#define INPUT_MAX 1024

static const char *const names[] = {
    "NXR_TOPOLOGY",        "NXR_DOMAINS", "NXR_NUM_THREADS", "NXR_SPIN",
    "NXR_PROVIDER_POLICY", "NXR_GEMM",    "NXR_DISPLAY_ENV",
};
enum { TOPOLOGY, DOMAINS, NUM_THREADS, SPIN, POLICY, GEMM, DISPLAY, NVARS };

static void require(int cond, const char *what)
{
    if (!cond) {
        fprintf(stderr, "settings_fuzz: property violated: %s\n", what);
        for (int i = 0; i < NVARS; i++) {
            const char *v = getenv(names[i]);
            fprintf(stderr, "  %s=%s%s%s\n", names[i], v ? "'" : "(unset)", v ? v : "",
                    v ? "'" : "");
        }
        abort();
    }
}

/* The model of a whole number in [0, INT_MAX]: digits only. */
static int model_uint(const char *v, unsigned *out)
{
    if (*v == '\0')
        return -1;
    unsigned long long n = 0;
    for (const char *p = v; *p != '\0'; p++) {
        if (*p < '0' || *p > '9')
            return -1;
        n = n * 10 + (unsigned)(*p - '0');
        if (n > INT_MAX)
            return -1;
    }
    *out = (unsigned)n;
    return 0;
}

/* The environment as nxr sees it: unset and empty are the same. */
static const char *var(int i)
{
    const char *v = getenv(names[i]);
    return v != NULL && v[0] != '\0' ? v : NULL;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1 || size > INPUT_MAX)
        return 0;
    unsigned pick = data[0];
    char input[INPUT_MAX];
    memcpy(input, data + 1, size - 1);
    input[size - 1] = '\0';
    char *field = input;
    for (int i = 0; i < NVARS; i++) {
        char *nl = field != NULL ? strchr(field, '\n') : NULL;
        if (nl != NULL)
            *nl = '\0';
        if (field != NULL)
            setenv(names[i], field, 1);
        else
            unsetenv(names[i]);
        field = nl != NULL ? nl + 1 : NULL;
    }

    struct nxr_runtime_opts o;
    nxr_runtime_opts_init(&o);
    o.ignore_env = (pick & 1) != 0;
    o.num_threads = (pick & 2) ? (int)(pick >> 4) - 4 : 0; /* -4..11 */
    o.spin = (pick & 4) ? (int)((pick >> 4) & 3) - 2 : 0;  /* -2..1 */
    o.provider_policy =
        (enum nxr_provider_policy)((pick & 8) ? (int)(pick >> 6) - 1 : 0); /* -1..2 */
    o.domains = (pick & 0x30) == 0x30 ? "0:0" : NULL;

    /* The model, in the order the rules are applied. */
    const char *v;
    int want = 0;
    unsigned threads = 0, spin = NXR_SPIN_DEFAULT;
    enum nxr_provider_policy policy = NXR_PROVIDER_STRICT;
    bool openblas = false;
    if (o.num_threads < 0 || o.spin < NXR_SPIN_NONE)
        want = -EINVAL;
    threads = o.num_threads > 0 ? (unsigned)o.num_threads : 0;
    if (want == 0 && threads == 0 && !o.ignore_env && (v = var(NUM_THREADS)) != NULL &&
        model_uint(v, &threads) != 0)
        want = NXR_ESYNTAX;
    if (want == 0 && o.spin == NXR_SPIN_NONE)
        spin = 0;
    else if (want == 0 && o.spin > 0)
        spin = (unsigned)o.spin;
    else if (want == 0 && !o.ignore_env && (v = var(SPIN)) != NULL && model_uint(v, &spin) != 0)
        want = NXR_ESYNTAX;
    if (want == 0 &&
        ((int)o.provider_policy < 0 || (int)o.provider_policy > NXR_PROVIDER_PROCESS_EXCLUSIVE))
        want = -EINVAL;
    else if (want == 0 && o.provider_policy != NXR_PROVIDER_POLICY_DEFAULT)
        policy = o.provider_policy;
    else if (want == 0 && !o.ignore_env && (v = var(POLICY)) != NULL) {
        if (strcmp(v, "exclusive") == 0)
            policy = NXR_PROVIDER_PROCESS_EXCLUSIVE;
        else if (strcmp(v, "strict") != 0)
            want = NXR_ESYNTAX;
    }
    if (want == 0 && !o.ignore_env && (v = var(GEMM)) != NULL) {
        if (strcmp(v, "openblas") == 0)
            openblas = true;
        else if (strcmp(v, "native") != 0)
            want = NXR_ESYNTAX;
    }
    /* NXR_DISPLAY_ENV: 1/true/yes/on, 0/false/no/off, nothing else. */
    bool display = false;
    if (want == 0 && !o.ignore_env && (v = var(DISPLAY)) != NULL) {
        if (strcmp(v, "1") == 0 || strcmp(v, "true") == 0 || strcmp(v, "yes") == 0 ||
            strcmp(v, "on") == 0)
            display = true;
        else if (strcmp(v, "0") != 0 && strcmp(v, "false") != 0 && strcmp(v, "no") != 0 &&
                 strcmp(v, "off") != 0)
            want = NXR_ESYNTAX;
    }

    struct nxr__settings s;
    char err[512] = "";
    int rc = nxr__settings_resolve(&s, &o, err, sizeof(err));
    require(rc == 0 || rc == NXR_ESYNTAX || rc == -EINVAL, "a documented status");
    require(rc == want, "the status the documented rules give");
    if (rc != 0) {
        require(err[0] != '\0', "an error explains itself");
        return 0;
    }
    require(s.num_threads == threads, "NXR_NUM_THREADS / num_threads");
    require(s.spin == spin, "NXR_SPIN / spin");
    require(s.policy == policy, "NXR_PROVIDER_POLICY / provider_policy");
    require(s.gemm_openblas == openblas, "NXR_GEMM");
    const char *topology = o.ignore_env ? NULL : var(TOPOLOGY);
    require(topology == NULL ? s.topology == NULL
                             : s.topology != NULL && strcmp(s.topology, topology) == 0,
            "NXR_TOPOLOGY passed through");
    const char *domains = o.domains != NULL ? o.domains : o.ignore_env ? NULL : var(DOMAINS);
    require(domains == NULL ? s.domains == NULL
                            : s.domains != NULL && strcmp(s.domains, domains) == 0,
            "NXR_DOMAINS: option over environment");
    require(s.display_env == display, "NXR_DISPLAY_ENV");

    if (s.domains != NULL) {
        struct nxr_domain_decl *decls;
        size_t n;
        rc = nxr__decls_parse(s.domains, &decls, &n, err, sizeof(err));
        require(rc == 0 || rc == NXR_ESYNTAX || rc == NXR_EBUDGET || rc == -ENOMEM,
                "NXR_DOMAINS: a documented status");
        if (rc == 0)
            nxr__decls_free(decls, n);
    }
    return 0;
}
