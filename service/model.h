/*
 * The demo's model: a stack of transformer-style MLP blocks with a softmax
 * head, weights from a fixed seed. Per block (pre-norm, residual):
 *     t = rmsnorm(x, gamma_l)
 *     u = act_l(t W_up + b_up)          act: SiLU on even blocks, GELU on odd
 *     x = x + u W_down + b_down
 * then  p = softmax(rmsnorm(x, gamma_f) W_head + b_head).
 * hidden -> ffn = 4 * hidden -> hidden; vocab columns in the head.
 *
 * Weights are one contiguous array of floats (svc_model_floats), laid out
 * block by block, so that a replica is one allocation and its placement
 * one page walk. The forward pass is written once, over an ops table
 * (service/ops.h), for every path.
 */
#ifndef NXR_SERVICE_MODEL_H
#define NXR_SERVICE_MODEL_H

#include <stddef.h>
#include <stdint.h>

#include "service/ops.h"

struct svc_model_shape {
    size_t hidden, ffn, layers, vocab;
};

/* hidden, 4 * hidden, layers, vocab. */
struct svc_model_shape svc_model_shape_make(size_t hidden, size_t layers, size_t vocab);

/* Floats in one copy of the weights. */
size_t svc_model_floats(const struct svc_model_shape *s);

/* The GEMM FLOPs of one row of a forward pass (2 per multiply-add of every
 * weight matrix; the norms, activations and softmax, linear in the widths,
 * are not counted): what the GEMM peak bounds. */
double svc_model_flops_per_row(const struct svc_model_shape *s);

/* Floats of scratch one forward pass over `rows` rows needs. */
size_t svc_model_scratch_floats(const struct svc_model_shape *s, size_t rows);

/* The weight matrices of w, in the order of the forward pass: block l's
 * W_up is matrix 2l, its W_down 2l + 1, the head's W_head the last, each
 * k x n row-major (ld = n) inside w. */
size_t svc_model_matrices(const struct svc_model_shape *s);
struct svc_model_matrix {
    const float *w;
    size_t k, n;
};
struct svc_model_matrix svc_model_matrix(const struct svc_model_shape *s, const float *w,
                                         size_t index);

/* Fills w (svc_model_floats floats) with the weights of `seed`: matrices
 * uniform in +-1/sqrt(fan-in), biases in +-0.02, gammas in 1 +- 0.05. The
 * same seed gives the same bits on every machine. */
void svc_model_fill(const struct svc_model_shape *s, uint64_t seed, float *w);

/* Fills x (rows x hidden) with request `index`'s input under `seed`
 * (uniform in +-1). */
void svc_model_input(const struct svc_model_shape *s, uint64_t seed, uint64_t index, size_t rows,
                     float *x);

/* out[rows x vocab] = the model on input[rows x hidden], with weights w,
 * through ops (self passed to each op). scratch: svc_model_scratch_floats
 * floats. Returns 0 or the first op's error. */
int svc_model_forward(const struct svc_ops *ops, void *self, const struct svc_model_shape *s,
                      const float *w, size_t rows, const float *input, float *out,
                      float *scratch);

/* The same with the weight matrices packed (packed[i]: matrix i of
 * svc_model_matrix, through ops->linear_packed; the gammas and biases from
 * w), or plain when packed is NULL. -EINVAL when ops has no linear_packed. */
int svc_model_forward_with(const struct svc_ops *ops, void *self, const struct svc_model_shape *s,
                           const float *w, const nxr_weights_t *const *packed, size_t rows,
                           const float *input, float *out, float *scratch);

#endif /* NXR_SERVICE_MODEL_H */
