/* Attention's scores over a transposed key tile (service/llama_scores.h)
 * against each position's dot product summed in double, and the cache's
 * key layout (service/kv_blocks.h) against the formula it documents. The
 * service's reference-decoder tests compare tokens, which the fixture's
 * model keeps even with the first 16 positions' scores zeroed (tried): its
 * attention hardly moves its logits. These compare the numbers. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "service/kv_blocks.h"
#include "service/llama_scores.h"
#include "tests/support/runtime.h"

static float uniform(uint64_t *s)
{
    *s = *s * 6364136223846793005ull + 1442695040888963407ull;
    return (float)((*s >> 40) & 0xffffff) / (float)0x1000000 - 0.5f;
}

/* Every count of positions up to a tile and past one vector of them, tiles
 * of 16, 32 and 37 (not a multiple of the vector), key sizes 64, 7 (less
 * than one group of four) and 9. */
Test(service_llama_scores, each_position_gets_its_own_dot_product)
{
    static const size_t tiles[] = {16, 32, 37}, sizes[] = {64, 7, 9};
    uint64_t seed = 7;
    for (size_t it = 0; it < 3; it++)
        for (size_t is = 0; is < 3; is++) {
            const size_t bt = tiles[it], hs = sizes[is];
            float *kt = malloc(hs * bt * sizeof(float)), q[64], att[40];
            for (size_t i = 0; i < hs * bt; i++)
                kt[i] = uniform(&seed);
            for (size_t d = 0; d < hs; d++)
                q[d] = uniform(&seed);
            for (size_t nt = 1; nt <= bt; nt++) {
                for (size_t j = 0; j < 40; j++)
                    att[j] = -99.0f;
                svc_llama_scores_tile(q, kt, bt, hs, nt, 0.125f, att);
                for (size_t j = 0; j < nt; j++) {
                    double want = 0;
                    for (size_t d = 0; d < hs; d++)
                        want += (double)q[d] * kt[d * bt + j];
                    want *= 0.125;
                    cr_assert(fabs(att[j] - want) <= 1e-6 + 1e-5 * fabs(want),
                              "tile %zu, key size %zu, %zu positions: score %zu is %g, want %g", bt,
                              hs, nt, j, att[j], want);
                }
                for (size_t j = nt; j < 40; j++)
                    cr_assert_eq(att[j], -99.0f, "score %zu written past %zu positions", j, nt);
            }
            free(kt);
        }
}

/* A key goes into its block's tile as a column (element d of position t at
 * layer's tile + d * block_tokens + t % block_tokens), its values as a row
 * after the tile, and neither overwrites the other. */
Test(service_llama_scores, keys_are_columns_of_their_blocks_tile)
{
    struct nxr_test_runtime fx;
    NXR_TEST_RUNTIME(&fx, NULL, NXR_TEST_PARK);
    nxr_domain_t *d = nxr_runtime_domain_at(fx.rt, 0);
    struct svc_kv_blocks p;
    const size_t bt = 4, layers = 2, kv = 3;
    cr_assert_eq(
        svc_kv_blocks_create(&p, d, 8 * layers * 2 * bt * kv * sizeof(float), bt, layers, kv), 0);
    size_t table[2];
    cr_assert(svc_kv_take(&p, &p, 2, table));
    for (size_t layer = 0; layer < layers; layer++)
        for (size_t t = 0; t < 2 * bt; t++) {
            float k[3], v[3];
            for (size_t e = 0; e < kv; e++) {
                k[e] = (float)(1000 * layer + 10 * t + e);
                v[e] = -k[e] - 1.0f;
            }
            svc_kv_put_key(&p, table, layer, t, k);
            memcpy(svc_kv_value(&p, table, layer, t), v, sizeof v);
        }
    for (size_t layer = 0; layer < layers; layer++)
        for (size_t t = 0; t < 2 * bt; t++) {
            const float *block = p.base + table[t / bt] * p.block_floats + layer * 2 * bt * kv;
            for (size_t e = 0; e < kv; e++) {
                const float k = (float)(1000 * layer + 10 * t + e);
                cr_assert_eq(block[e * bt + t % bt], k, "layer %zu position %zu key %zu", layer, t,
                             e);
                cr_assert_eq(block[bt * kv + (t % bt) * kv + e], -k - 1.0f,
                             "layer %zu position %zu value %zu", layer, t, e);
            }
        }
    svc_kv_give(&p, &p, 2, table);
    svc_kv_blocks_destroy(&p);
    nxr_test_runtime_close(&fx);
}
