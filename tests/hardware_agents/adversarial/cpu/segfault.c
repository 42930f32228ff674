// expect: runtime_error
// problem: scale_shift
// needle: SIGSEGV
// why: dereferences NULL.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void kernel(const float* x, float* out) {
    *(volatile int*)0 = 1;
    #pragma omp parallel for
    for (long i = 0; i < (long)M * N; i++) { out[i] = 2.0f * x[i] + 1.0f; }
}
