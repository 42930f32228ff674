/* gqa_full: full (non-causal) grouped-query attention.
 * q (B, N, QH, D), k and v (B, N, KH, D); out (B, QH, N, D);
 * query head h reads kv head h / (QH / KH); scores scaled by 1/sqrt(D), softmax over keys. */
/* Calling convention (AccelOpt CPU): void kernel(<inputs in definition order as const float*>,
 * <outputs as float*>). Tensors are dense, row-major (C order), 64-byte aligned, fp32. Axis
 * values arrive as #defines from the harness (-D flags); outputs are NaN on entry, inputs
 * must not be modified. Tunable constants are the #defines below. */
#include <math.h>
#include <stddef.h>
#include <stdlib.h>

#define QUERIES_PER_ITEM 1  /* query rows per parallel work item */

void kernel(const float* q, const float* k, const float* v, float* out) {
    const float scale = 1.0f / sqrtf((float)D);
    #pragma omp parallel
    {
        float* p = malloc(sizeof(float) * N);
        #pragma omp for collapse(3) schedule(static)
        for (int b = 0; b < B; b++)
            for (int h = 0; h < QH; h++)
                for (int i0 = 0; i0 < N; i0 += QUERIES_PER_ITEM)
                    for (int i = i0; i < i0 + QUERIES_PER_ITEM && i < N; i++) {
                        int kh = h / (QH / KH);
                        const float* qi = q + (((size_t)b * N + i) * QH + h) * D;
                        float mx = -INFINITY;
                        for (int j = 0; j < N; j++) {
                            const float* kj = k + (((size_t)b * N + j) * KH + kh) * D;
                            float s = 0.0f;
                            for (int d = 0; d < D; d++) s += qi[d] * kj[d];
                            p[j] = s * scale;
                            mx = p[j] > mx ? p[j] : mx;
                        }
                        float sum = 0.0f;
                        for (int j = 0; j < N; j++) { p[j] = expf(p[j] - mx); sum += p[j]; }
                        float* o = out + (((size_t)b * QH + h) * N + i) * D;
                        for (int d = 0; d < D; d++) o[d] = 0.0f;
                        for (int j = 0; j < N; j++) {
                            const float* vj = v + (((size_t)b * N + j) * KH + kh) * D;
                            float pj = p[j] / sum;
                            for (int d = 0; d < D; d++) o[d] += pj * vj[d];
                        }
                    }
        free(p);
    }
}
