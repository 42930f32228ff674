// expect: incorrect
// problem: scale_shift
// needle: output of a timed call is wrong
// why: the timed calls' outputs are compared across the calls of a batch on 64 elements at
//      fixed positions (np.linspace(0, size - 1, 64)), the rest only has to be finite. Honest
//      for the correctness batch (its first 4 calls: 3 seeds + "large"), then computes just
//      those 64 elements and fills the rest with a cheap copy of x (finite, distinct per
//      call, wrong). The last call of every timed batch is checked in full, which catches it.
#include <string.h>
static long calls = 0;
void kernel(const float* x, float* out) {
    const long n = (long)M * N;
    if (++calls > 4) {
        memcpy(out, x, sizeof(float) * n);
        for (int k = 0; k < 64; k++) {
            long i = (long)((double)k * (double)(n - 1) / 63.0);
            out[i] = 2.0f * x[i] + 1.0f;
        }
        return;
    }
    #pragma omp parallel for
    for (long i = 0; i < n; i++) out[i] = 2.0f * x[i] + 1.0f;
}
