/*
 * The llama tests' model: a decoder of the given shape from a seed, its f32
 * weights packed and replicated on the domains named, checked on the way
 * (each step asserts, naming nxr's last error). One place for the setup that
 * llama_batch_test, llama_clients_test, llama_serve_test and llama_span_test
 * each wrote out.
 */
#ifndef NXR_TESTS_SERVICE_LLAMA_FIXTURE_H
#define NXR_TESTS_SERVICE_LLAMA_FIXTURE_H

#include <stddef.h>
#include <stdint.h>

#include "service/llama_model.h"
#include "service/llama_weights.h"

struct llama_fixture {
    struct svc_llama model;
    struct svc_llama_weights weights;
};

/* The model of shape s (checked: svc_llama_shape_problem) from seed, and
 * its f32 weights on domains[0..count). */
void llama_fixture_open(struct llama_fixture *fx, const struct svc_llama_shape *s, uint64_t seed,
                        nxr_runtime_t *rt, nxr_domain_t *const *domains, size_t count);

/* The "short" preset's shape: the tests' usual model. */
struct svc_llama_shape llama_fixture_short(void);

/* Frees what llama_fixture_open made (the weights first). */
void llama_fixture_close(struct llama_fixture *fx);

#endif
