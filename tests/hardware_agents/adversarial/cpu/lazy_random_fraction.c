// expect: incorrect
// problem: cpu/mamba
// needle: output of a timed call is wrong
// why: after its first 8 calls (the correctness cases, then some) returns a wrong but finite output (a cheap
//      function of its own inputs, different for every call) on one call in 6 (17 %; a fixed
//      pattern rather than a random draw, so that every profile has lazy calls to catch). With
//      full checks bounded by the float64 reference's time (~7 of ~130 calls on mamba) it escaped
//      with probability 0.83^7 = 28 % (before: passed in 1 of 8 profiles). Now 90 calls per
//      profile, or every call, are checked in full against the baseline run on the same inputs:
//      f = 17 % escapes with probability 0.83^90 < 1e-7.
#include <math.h>
#include <stddef.h>
static long calls;
void kernel(const float* delta, const float* u, const float* a, const float* b, const float* c,
            float* out) {
    if (++calls > 8 && calls % 6 == 5) {
        for (long i = 0; i < (long)C * M; i++) out[i] = delta[i] * u[i];
        return;
    }
    #pragma omp parallel for schedule(static)
    for (int ch = 0; ch < C; ch++) {
        float* o = out + (size_t)ch * M;
        const float* dl = delta + (size_t)ch * M;
        const float* uu = u + (size_t)ch * M;
        for (int i = 0; i < M; i++) o[i] = 0.0f;
        for (int s = 0; s < S; s++) {
            float as = a[(size_t)ch * S + s];
            float h = 0.0f;
            for (int i = 0; i < M; i++) {
                h = expf(dl[i] * as) * h + dl[i] * b[(size_t)s * M + i] * uu[i];
                o[i] += c[(size_t)s * M + i] * h;
            }
        }
    }
}
