/* The llama tests' model and packed weights (see llama_fixture.h). */
#include "tests/service/llama_fixture.h"

#include <criterion/criterion.h>

#include "runtime/nxr.h"

void llama_fixture_open(struct llama_fixture *fx, const struct svc_llama_shape *s, uint64_t seed,
                        nxr_runtime_t *rt, nxr_domain_t *const *domains, size_t count)
{
    const char *problem = svc_llama_shape_problem(s);
    cr_assert_null(problem, "%s", problem);
    cr_assert_eq(svc_llama_create(s, seed, &fx->model), 0);
    cr_assert_eq(
        svc_llama_weights_create(&fx->weights, rt, &fx->model, SVC_LLAMA_F32, domains, count), 0,
        "%s", nxr_last_error());
}

struct svc_llama_shape llama_fixture_short(void)
{
    struct svc_llama_shape s;
    cr_assert_eq(svc_llama_shape_named("short", &s), 0);
    return s;
}

void llama_fixture_close(struct llama_fixture *fx)
{
    svc_llama_weights_destroy(&fx->weights);
    svc_llama_destroy(&fx->model);
}
