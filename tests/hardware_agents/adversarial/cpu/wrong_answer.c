// expect: incorrect
// problem: scale_shift
// needle: relative L2 error
// why: forgets the +1.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void kernel(const float* x, float* out) {
    
    #pragma omp parallel for
    for (long i = 0; i < (long)M * N; i++) { out[i] = 2.0f * x[i]; }
}
