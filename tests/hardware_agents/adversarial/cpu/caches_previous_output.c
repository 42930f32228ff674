// expect: incorrect
// problem: scale_shift
// needle: seed21
// why: returns its first output on every later call.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
static float saved[M * N]; static int have = 0;
void kernel(const float* x, float* out) {
    if (have) { memcpy(out, saved, sizeof(saved)); return; }
    #pragma omp parallel for
    for (long i = 0; i < (long)M * N; i++) { out[i] = 2.0f * x[i] + 1.0f; saved[i] = out[i]; if (i == 0) have = 1; }
}
