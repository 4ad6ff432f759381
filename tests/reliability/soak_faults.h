/*
 * The soak's injectors (tests/reliability/soak_test.c): a foreign GEMM
 * provider that wraps nxr's native one, and an executor that wraps another
 * (the service's host pool), each failing every period-th call while its
 * gate is open. The soak opens and closes gates from its schedule, keyed on
 * request ids (never on time), and reads back how many calls each one
 * failed, so it can check that every injected failure reached exactly the
 * requests it should: one failed GEMM call fails one request, one failed
 * submit fails the requests of that batch, one failed install fails the
 * request whose kernel it was to run.
 */
#ifndef NXR_TESTS_SOAK_FAULTS_H
#define NXR_TESTS_SOAK_FAULTS_H

#include <stdatomic.h>
#include <stdbool.h>

#include "runtime/nxr.h"

/* Every period-th call that passes an open gate fails. */
struct soak_gate {
    atomic_long period; /* 0: closed */
    atomic_long calls;  /* calls seen while open */
};

void soak_gate_open(struct soak_gate *g, long period);
void soak_gate_close(struct soak_gate *g);

/* True when this call must fail. Any thread. */
bool soak_gate_fail(struct soak_gate *g);

/* A provider of the GEMM family, PER_CALL_BOUND on the engine's workers
 * like the native one it forwards to, so its results are the native bits.
 * While `gate` fails a call it returns `error` without computing. */
struct soak_provider {
    struct soak_gate *gate;
    int error;
    nxr_provider_t *native;
    atomic_long failed; /* calls it failed */
};

/* Fills p and creates the foreign provider around it (the caller destroys
 * *out with nxr_provider_destroy; p must outlive every runtime given it).
 * 0 or the error of nxr_provider_native_create / nxr_provider_create. */
int soak_provider_create(struct soak_provider *p, struct soak_gate *gate, int error,
                         nxr_provider_t **out);

/* Releases the native provider (after the last runtime that used p). */
void soak_provider_release(struct soak_provider *p);

/* An executor around another. While `gate` fails a call, install and
 * submit return `error` having started nothing (the contract's failure).
 * A synchronous one runs each submission to its end before submit returns
 * (as the OpenMP adapter does), which a caller-managed domain needs: its
 * guard admits one operation at a time, and the serving thread would
 * otherwise submit the next batch while the last one still runs. */
struct soak_executor {
    struct nxr_executor inner;
    struct soak_gate *gate;
    int error;
    bool synchronous;
    atomic_long failed_installs; /* each would have run one kernel call */
    atomic_long failed_items;    /* items of failed submissions */
};

/* Replaces *inout with x wrapping it. x must outlive every use nxr makes
 * of the executor (until the runtime is destroyed). */
void soak_executor_wrap(struct soak_executor *x, struct nxr_executor *inout,
                        struct soak_gate *gate, int error, bool synchronous);

#endif /* NXR_TESTS_SOAK_FAULTS_H */
