/* The quiet-runtime fixture (see runtime.h). */
#include "tests/support/runtime.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

/* In t->flags: the template asked for more CPUs than are allowed. */
#define TEMPLATE_UNMET 0x80000000u

int nxr_test_runtime_cpus_needed(const char *tmpl)
{
    return tmpl != NULL ? nxr_test_cpus_needed(tmpl) : 0;
}

void nxr_test_runtime_opts(struct nxr_test_runtime *t, const char *tmpl, unsigned flags)
{
    memset(t, 0, sizeof *t);
    nxr_runtime_opts_init(&t->opts);
    t->flags = flags;
    t->opts.ignore_env = true;
    if (flags & NXR_TEST_PARK)
        t->opts.spin = NXR_SPIN_NONE;
    if (tmpl == NULL)
        return;
    const char *text = nxr_test_expand(tmpl);
    if (text == NULL) /* the open reports it: a NULL here would mean the default layout */
        snprintf(t->err, sizeof t->err, "template \"%s\" needs %d allowed CPUs, the process has %d",
                 tmpl, nxr_test_cpus_needed(tmpl), nxr_test_cpu_count());
    if (flags & NXR_TEST_TOPOLOGY)
        t->opts.topology = text;
    else
        t->opts.domains = text;
    if (text == NULL)
        t->flags |= TEMPLATE_UNMET; /* refused at the open */
}

int nxr_test_runtime_open(struct nxr_test_runtime *t)
{
    t->rt = NULL;
    t->ctx = NULL;
    if (t->flags & TEMPLATE_UNMET)
        return -EINVAL; /* t->err says which template */
    int rc = nxr_runtime_create(&t->opts, &t->rt);
    if (rc != 0) {
        snprintf(t->err, sizeof t->err, "%s", nxr_last_error());
        return rc;
    }
    if (t->flags & NXR_TEST_CTX) {
        rc = nxr_ctx_create(t->rt, nxr_domain_id(nxr_runtime_domain_at(t->rt, 0)), &t->ctx);
        if (rc != 0) {
            snprintf(t->err, sizeof t->err, "nxr_ctx_create on the first domain: %s",
                     nxr_strerror(rc));
            nxr_runtime_destroy(t->rt);
            t->rt = NULL;
            return rc;
        }
    }
    return 0;
}

void nxr_test_runtime_close(struct nxr_test_runtime *t)
{
    nxr_ctx_destroy(t->ctx);
    nxr_runtime_destroy(t->rt);
    t->ctx = NULL;
    t->rt = NULL;
}
