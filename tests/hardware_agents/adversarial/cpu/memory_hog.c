// expect: runtime_error
// problem: scale_shift
// needle: SIGABRT
// why: allocates without bound.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void kernel(const float* x, float* out) {
    for (;;) { char* p = malloc(256 << 20); if (!p) abort(); memset(p, 1, 256 << 20); }
    #pragma omp parallel for
    for (long i = 0; i < (long)M * N; i++) { out[i] = 2.0f * x[i] + 1.0f; }
}
