// expect: incorrect
// problem: scale_shift
// needle: lower-precision
// why: computes in half precision.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void kernel(const float* x, float* out) {
    
    #pragma omp parallel for
    for (long i = 0; i < (long)M * N; i++) { _Float16 h = (_Float16)x[i]; out[i] = 2.0f * (float)h + 1.0f; }
}
