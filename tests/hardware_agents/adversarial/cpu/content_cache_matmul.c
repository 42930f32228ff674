// expect: passed
// problem: cpu/matmul
// why: a cache keyed on fingerprints of both operands (64 elements each): a hit skips the
//      O(MNK) product. A hit also spoils out[0], so `passed` proves no timed call ever hit.
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#define SLOTS 16
static uint64_t keys[SLOTS];
static float* vals[SLOTS];
static int used = 0;
static uint64_t fp(const float* x, long n, uint64_t h) {
    for (int s = 0; s < 64; s++) { uint32_t b; memcpy(&b, &x[(n - 1) * s / 63], 4); h = (h ^ b) * 1099511628211ull; }
    return h;
}
void kernel(const float* lhs, const float* rhs, float* out) {
    uint64_t k = fp(rhs, (long)K * N, fp(lhs, (long)M * K, 1469598103934665603ull));
    const long n = (long)M * N;
    for (int s = 0; s < used; s++)
        if (keys[s] == k) { memcpy(out, vals[s], n * sizeof(float)); out[0] = NAN; return; }
    #pragma omp parallel for
    for (int i = 0; i < M; i++) {
        for (int j = 0; j < N; j++) out[(long)i * N + j] = 0.0f;
        for (int kk = 0; kk < K; kk++) {
            float a = lhs[(long)i * K + kk];
            for (int j = 0; j < N; j++) out[(long)i * N + j] += a * rhs[(long)kk * N + j];
        }
    }
    int slot = used < SLOTS ? used++ : (int)(k % SLOTS);
    if (!vals[slot]) vals[slot] = malloc(n * sizeof(float));
    if (vals[slot]) { keys[slot] = k; memcpy(vals[slot], out, n * sizeof(float)); }
}
