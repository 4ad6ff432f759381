/*
 * nxr_strerror: one name per status code. The table is indexed by
 * NXR_ERANGE_FIRST - code, so adding a code means adding one row here.
 */
#include "base/nxr_status.h"

#include <string.h>

static const char *const nxr_messages[] = {
    [NXR_ERANGE_FIRST - NXR_EREENTRANT] =
        "NXR_EREENTRANT: domain entered from its own worker or while active",
    [NXR_ERANGE_FIRST - NXR_EOVERLAP] = "NXR_EOVERLAP: managed domains' CPU sets overlap",
    [NXR_ERANGE_FIRST - NXR_EPLACEMENT] =
        "NXR_EPLACEMENT: placement could not be applied or verified",
    [NXR_ERANGE_FIRST - NXR_EEMPTYSET] = "NXR_EEMPTYSET: domain CPU set is empty",
    [NXR_ERANGE_FIRST - NXR_EDISALLOWED] = "NXR_EDISALLOWED: CPU outside the process's allowed set",
    [NXR_ERANGE_FIRST - NXR_EDUPID] = "NXR_EDUPID: duplicate domain id",
    [NXR_ERANGE_FIRST - NXR_EBUDGET] =
        "NXR_EBUDGET: thread budget is 0 or exceeds the domain's CPUs",
    [NXR_ERANGE_FIRST - NXR_ESYNTAX] = "NXR_ESYNTAX: malformed configuration string",
    [NXR_ERANGE_FIRST - NXR_ETOPOLOGY] = "NXR_ETOPOLOGY: topology could not be loaded",
    [NXR_ERANGE_FIRST - NXR_ENODOMAIN] = "NXR_ENODOMAIN: no such domain",
    [NXR_ERANGE_FIRST - NXR_EUNSUPPORTED] =
        "NXR_EUNSUPPORTED: no configured provider serves the request",
    [NXR_ERANGE_FIRST - NXR_EADMISSION] = "NXR_EADMISSION: caller-managed domain already active",
    [NXR_ERANGE_FIRST - NXR_EOUTSTANDING] =
        "NXR_EOUTSTANDING: buffers still outstanding at shutdown",
    [NXR_ERANGE_FIRST - NXR_EBROKEN] = "NXR_EBROKEN: object failed earlier and refuses work",
    [NXR_ERANGE_FIRST - NXR_EFPENV] =
        "NXR_EFPENV: foreign code changed the floating-point environment",
    [NXR_ERANGE_FIRST - NXR_EEXECUTOR] = "NXR_EEXECUTOR: executor table incomplete or inconsistent",
    [NXR_ERANGE_FIRST - NXR_EPROVIDER] =
        "NXR_EPROVIDER: impossible provider classification, incomplete table or misplaced global count",
    [NXR_ERANGE_FIRST - NXR_EMIXED] =
        "NXR_EMIXED: inputs on several domains under the single-domain policy",
    [NXR_ERANGE_FIRST - NXR_EFORKED] =
        "NXR_EFORKED: object inherited through fork(); create a new runtime in the child",
};

bool nxr_status_is_nxr(int status)
{
    return status < NXR_ERANGE_FIRST && status >= NXR_ERANGE_LAST;
}

const char *nxr_strerror(int status)
{
    if (status == 0)
        return "success";
    if (nxr_status_is_nxr(status))
        return nxr_messages[NXR_ERANGE_FIRST - status];
    if (status < 0 && status > NXR_ERANGE_FIRST) {
        /* strerrordesc_np returns a static string and, unlike strerror, is
         * thread-safe (glibc >= 2.32). */
        const char *desc = strerrordesc_np(-status);
        if (desc != NULL)
            return desc;
    }
    return "unknown status";
}
