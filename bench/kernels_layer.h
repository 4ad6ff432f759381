/*
 * bench/kernels, the service's own products (kernels_layer.c): a decoder
 * layer's f32 products as the llama service packs them (untransposed W in
 * column panels, nxr_weights_create), read from memory (enough copies to
 * pass the last-level cache), at the rows a serving step runs (a decode
 * step's batch, with prompt rows beside it). Against the streaming read of
 * the same copies on the same threads (the limit: a product can take no
 * less time than reading its W) and cblas_sgemm on the unpacked copies
 * (the peer). GB/s counts W's bytes, so nxr / read is the fraction of the
 * limit a step's products reach at that many rows.
 */
#ifndef NXR_BENCH_KERNELS_LAYER_H
#define NXR_BENCH_KERNELS_LAYER_H

#include <stdbool.h>
#include <stddef.h>

struct layer_row {
    size_t m, k, n;
    double nxr_gbs, openblas_gbs, read_gbs; /* medians over rounds */
    double nxr_vs_read, nxr_vs_openblas;    /* ratios of the medians */
};

struct layer_report {
    unsigned threads;
    size_t copies_mib; /* W's copies in all, per shape */
    struct layer_row row[16];
    size_t nrow;
};

/* A 110m layer's up and down projections (768 x 2048, 2048 x 768) at m =
 * 1, 4, 8, 12, 16, 20, `reps` rounds, contenders alternating; short (CI):
 * the first shape at m = 1 and 16, two copies. */
void layer_section(struct layer_report *rep, bool short_run, int reps);

void layer_print_text(const struct layer_report *rep);

/* ,"layer_products":{...} (inside the caller's object). */
void layer_print_json(const struct layer_report *rep);

#endif /* NXR_BENCH_KERNELS_LAYER_H */
