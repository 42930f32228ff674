/* silu: out = x / (1 + exp(-x)), elementwise over (M, N). */
/* Calling convention (AccelOpt CPU): void kernel(<inputs in definition order as const float*>,
 * <outputs as float*>). Tensors are dense, row-major (C order), 64-byte aligned, fp32. Axis
 * values arrive as #defines from the harness (-D flags); outputs are NaN on entry, inputs
 * must not be modified. Tunable constants are the #defines below. */
#include <math.h>
#include <stddef.h>

#define CHUNK 4096  /* elements per scheduling chunk */

void kernel(const float* x, float* out) {
    const long n = (long)M * N;
    #pragma omp parallel for schedule(static, CHUNK)
    for (long i = 0; i < n; i++) out[i] = x[i] / (1.0f + expf(-x[i]));
}
