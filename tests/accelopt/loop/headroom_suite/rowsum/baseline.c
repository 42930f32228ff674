/* rowsum: out[i] = sum_j x[i][j]. One partial sum per row: every add waits for the one
 * before it, so the loop runs at the latency of the add, not at memory speed. */
#include <stddef.h>

#define LANES 1  /* independent partial sums per row */

void kernel(const float* x, float* out) {
    #pragma omp parallel for schedule(static)
    for (int i = 0; i < M; i++) {
        const float* row = x + (size_t)i * N;
        float acc[LANES];
        for (int l = 0; l < LANES; l++) acc[l] = 0.0f;
        int j = 0;
        for (; j + LANES <= N; j += LANES)
            for (int l = 0; l < LANES; l++) acc[l] += row[j + l];
        for (; j < N; j++) acc[0] += row[j];
        float s = 0.0f;
        for (int l = 0; l < LANES; l++) s += acc[l];
        out[i] = s;
    }
}
