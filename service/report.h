/*
 * The demo's report: a human table or one JSON object (keys documented in
 * docs/guide.md, "What `nxr demo` shows"), including the benchmark ratios against
 * the peers measured in the same run and whether each goal was met.
 */
#ifndef NXR_SERVICE_REPORT_H
#define NXR_SERVICE_REPORT_H

#include <stdio.h>

#include "service/demo.h"

/* The goals the demo checks itself against (issue 11). */
#define SVC_GOAL_RPS_VS_OMP     1.2 /* nxr req/s >= 1.2x OpenMP's */
#define SVC_GOAL_P99_VS_OMP     0.8 /* nxr p99 <= 0.8x OpenMP's */
#define SVC_GOAL_P99_OVER_P50   5.0 /* nxr p99 <= 5x its own p50 */
/* The goals of batching and packed weights (issue 19), against the
 * baseline (--max-batch 1 --weights plain) and the machine. */
#define SVC_GOAL_RPS_VS_BASELINE   2.5 /* nxr req/s >= 2.5x the baseline's */
#define SVC_GOAL_P99_VS_BASELINE   1.0 /* nxr p99 <= the baseline's */
#define SVC_GOAL_FRACTION_OF_LIMIT 0.5 /* nxr req/s >= 0.5x the GEMM-peak limit */

void svc_report_text(FILE *f, const struct svc_demo_result *r);
void svc_report_json(FILE *f, const struct svc_demo_result *r);

#endif /* NXR_SERVICE_REPORT_H */
