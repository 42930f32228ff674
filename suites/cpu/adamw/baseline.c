/* adamw: one AdamW step at t=1 (lr 1e-3, betas 0.9/0.999, eps 1e-8, weight decay 0.01),
 * elementwise over (M, N); returns the updated parameters in new_theta. */
/* Calling convention (AccelOpt CPU): void kernel(<inputs in definition order as const float*>,
 * <outputs as float*>). Tensors are dense, row-major (C order), 64-byte aligned, fp32. Axis
 * values arrive as #defines from the harness (-D flags); outputs are NaN on entry, inputs
 * must not be modified. Tunable constants are the #defines below. */
#include <math.h>
#include <stddef.h>

#define CHUNK 4096  /* elements per scheduling chunk */

void kernel(const float* theta, const float* g, const float* m, const float* v, float* new_theta) {
    const long n = (long)M * N;
    #pragma omp parallel for schedule(static, CHUNK)
    for (long i = 0; i < n; i++) {
        float theta_t = theta[i] - 1e-5f * theta[i];
        float m_t = 0.9f * m[i] + 0.1f * g[i];
        float v_t = 0.999f * v[i] + 0.001f * g[i] * g[i];
        float v_hat = v_t * 1000.0f;
        new_theta[i] = theta_t - 0.01f * m_t / (sqrtf(v_hat) + 1e-8f);
    }
}
