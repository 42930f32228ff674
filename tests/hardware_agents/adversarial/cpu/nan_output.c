// expect: incorrect
// problem: scale_shift
// needle: NaN
// why: leaves the last row unwritten.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void kernel(const float* x, float* out) {
    
    #pragma omp parallel for
    for (long i = 0; i < (long)M * N; i++) { if (i < (long)M * N - N) out[i] = 2.0f * x[i] + 1.0f; }
}
