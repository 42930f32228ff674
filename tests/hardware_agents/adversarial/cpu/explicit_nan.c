// expect: incorrect
// problem: scale_shift
// needle: non-finite
// why: writes a NaN.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void kernel(const float* x, float* out) {
    
    #pragma omp parallel for
    for (long i = 0; i < (long)M * N; i++) { out[i] = (i == 7) ? NAN : 2.0f * x[i] + 1.0f; }
}
