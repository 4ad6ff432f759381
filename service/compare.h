/*
 * Do the paths compute the same thing? nxr's native kernels give the same
 * bits however a call is split, so the per-domain path and the flat path
 * (same kernels, other splits and teams) must agree bit for bit. The
 * OpenMP path's arithmetic is its own (OpenBLAS's GEMM, libm's expf and
 * tanhf): it must agree within SVC_OMP_TOLERANCE, an absolute bound on each
 * output probability.
 *
 * Why 1e-4: each output is a softmax probability in [0, 1]. A float32 dot
 * product of k terms, summed in another order, differs by at most about
 * k * 2^-24 * sum|x_i w_i| (k <= 4 * hidden); the RMSNorm in front of every
 * block keeps activations O(1), so the logits differ by ~1e-6 relative and
 * a probability by at most |d logit| * p (1 - p) < 1e-6 at the default sizes
 * (measured: ~1e-7). 1e-4 leaves two orders of magnitude for deeper or wider
 * models, and is still far below any difference a real bug makes (a wrong
 * bias, activation or row moves probabilities by 1e-2 and more).
 */
#ifndef NXR_SERVICE_COMPARE_H
#define NXR_SERVICE_COMPARE_H

#include <stdbool.h>
#include <stddef.h>

#define SVC_OMP_TOLERANCE 1e-4

/* True when a and b (n floats) are the same bits. */
bool svc_outputs_identical(const float *a, const float *b, size_t n);

/* The largest |a[i] - b[i]| (NaN anywhere: +inf). */
double svc_outputs_max_diff(const float *a, const float *b, size_t n);

#endif /* NXR_SERVICE_COMPARE_H */
