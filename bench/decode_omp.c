/* bench/decode's read on OpenMP threads (see decode_omp.h). */
#include "bench/decode_omp.h"

#include "bench/kernels_peers.h"

float decode_omp_read(const float *w, size_t floats, int threads)
{
    const size_t units = floats / 64, share = (units + (size_t)threads - 1) / (size_t)threads;
    float sum = 0.0f;
#pragma omp parallel for schedule(static) num_threads(threads) reduction(+ : sum)
    for (int t = 0; t < threads; t++) {
        const size_t begin = (size_t)t * share, end = begin + share < units ? begin + share : units;
        if (begin < end)
            sum += peer_read_sum(w + begin * 64, (end - begin) * 64);
    }
    return sum;
}
