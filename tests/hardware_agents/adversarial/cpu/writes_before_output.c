// expect: incorrect
// problem: scale_shift
// needle: outside the bounds of out
// why: writes before the start of its output.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void kernel(const float* x, float* out) {
    out[-5] = 0.0f;
    #pragma omp parallel for
    for (long i = 0; i < (long)M * N; i++) { out[i] = 2.0f * x[i] + 1.0f; }
}
