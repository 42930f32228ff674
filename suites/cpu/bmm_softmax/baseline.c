/* bmm_softmax: out[b] = softmax(lhs[b] @ rhs[b], axis=-1); lhs (B, M, K), rhs (B, K, N). */
/* Calling convention (AccelOpt CPU): void kernel(<inputs in definition order as const float*>,
 * <outputs as float*>). Tensors are dense, row-major (C order), 64-byte aligned, fp32. Axis
 * values arrive as #defines from the harness (-D flags); outputs are NaN on entry, inputs
 * must not be modified. Tunable constants are the #defines below. */
#include <math.h>
#include <stddef.h>

#define ROWS_PER_ITEM 1  /* rows handled per parallel work item */

void kernel(const float* lhs, const float* rhs, float* out) {
    #pragma omp parallel for schedule(static)
    for (int r0 = 0; r0 < B * M; r0 += ROWS_PER_ITEM)
        for (int r = r0; r < r0 + ROWS_PER_ITEM && r < B * M; r++) {
            int b = r / M;
            const float* a = lhs + (size_t)r * K;
            const float* W = rhs + (size_t)b * K * N;
            float* o = out + (size_t)r * N;
            for (int j = 0; j < N; j++) o[j] = 0.0f;
            for (int k = 0; k < K; k++)
                for (int j = 0; j < N; j++) o[j] += a[k] * W[(size_t)k * N + j];
            float mx = o[0];
            for (int j = 1; j < N; j++) mx = o[j] > mx ? o[j] : mx;
            float sum = 0.0f;
            for (int j = 0; j < N; j++) { o[j] = expf(o[j] - mx); sum += o[j]; }
            for (int j = 0; j < N; j++) o[j] /= sum;
        }
}
