// expect: incorrect
// problem: scale_shift
// needle: timed call
// why: after its first 6 calls computes only every fourth call and copies that output into the
//      others (finite, plausible values, a quarter of the work): caught as the same output twice
//      in a batch, or as NaN where the buffer it copies from was poisoned for the batch.
#include <string.h>
static int calls = 0;
static float* last = 0;
void kernel(const float* x, float* out) {
    const long n = (long)M * N;
    if (++calls > 6 && last && calls % 4) { memcpy(out, last, n * sizeof(float)); return; }
    #pragma omp parallel for
    for (long i = 0; i < n; i++) out[i] = 2.0f * x[i] + 1.0f;
    last = out;
}
