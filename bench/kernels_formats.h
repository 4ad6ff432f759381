/*
 * bench/kernels, the weight formats (kernels_formats.c): nxr_sgemm_packed
 * against one W packed as f32, bf16 and 8-bit blocks, at m = 1 (a decode
 * step's GEMV) and small m, with the streaming read of the f32 W on the
 * same threads as the limit, all in one run. A format's GB/s counts the
 * bytes of its own packed copy: at the read limit a format is as fast as
 * its bytes allow, and its speed-up over f32 is what tok/s gains.
 */
#ifndef NXR_BENCH_KERNELS_FORMATS_H
#define NXR_BENCH_KERNELS_FORMATS_H

#include <stddef.h>

struct format_row {
    const char *format; /* "f32", "bf16", "q8" */
    size_t m;
    size_t bytes;   /* of the packed copy */
    double gbs;     /* bytes / median time */
    double vs_read; /* gbs / read_gbs */
    double vs_f32;  /* median f32 time / this time, same m */
};

struct formats_report {
    unsigned threads;
    size_t mib, rows, k; /* op(W) = W^T, W rows x k f32 */
    double read_gbs;
    struct format_row row[12];
    size_t nrow;
};

/* W of `mib` MiB of f32, rows of k (0: 4096 from 64 MiB up, else 1024;
 * a decode step's projections have k = 768-2048, where how a copy's rows
 * are laid out shows); `reps` rounds, contenders alternating. */
void formats_section(struct formats_report *rep, size_t mib, size_t k, int reps);

void formats_print_text(const struct formats_report *rep);

/* ,"formats":{...} (inside the caller's object). */
void formats_print_json(const struct formats_report *rep);

#endif /* NXR_BENCH_KERNELS_FORMATS_H */
