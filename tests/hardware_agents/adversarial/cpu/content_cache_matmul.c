// expect: passed
// problem: cpu/matmul
// why: a cache keyed on fingerprints of both operands (64 elements each): a hit skips the
//      O(MNK) product. A hit also spoils out[0], so `passed` proves no timed call ever hit.
// ran: content_cache_matmul: cached call 1's output and finds it again by its fingerprint
// ran: content_cache_matmul: call 8 looked its operands up among 7 cached outputs: a miss
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#define SLOTS 16
static uint64_t keys[SLOTS];
static float* vals[SLOTS];
static int used = 0;
static long calls = 0;
static int find(uint64_t k) {
    for (int s = 0; s < used; s++)
        if (keys[s] == k) return s;
    return -1;
}
static uint64_t fp(const float* x, long n, uint64_t h) {
    for (int s = 0; s < 64; s++) { uint32_t b; memcpy(&b, &x[(n - 1) * s / 63], 4); h = (h ^ b) * 1099511628211ull; }
    return h;
}
void kernel(const float* lhs, const float* rhs, float* out) {
    uint64_t k = fp(rhs, (long)K * N, fp(lhs, (long)M * K, 1469598103934665603ull));
    const long n = (long)M * N;
    int hit = find(k);
    calls++;
    if (hit >= 0) {
        fprintf(stderr, "content_cache_matmul: call %ld served from the cache\n", calls);
        memcpy(out, vals[hit], n * sizeof(float)); out[0] = NAN; return;
    }
    if (calls == 8 && used == 7) fputs("content_cache_matmul: call 8 looked its operands up among 7 cached outputs: a miss\n", stderr);
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
    /* the trick is live: the same operands are found again, where their product was kept */
    if (calls == 1 && (hit = find(fp(rhs, (long)K * N, fp(lhs, (long)M * K, 1469598103934665603ull)))) >= 0 &&
        memcmp(vals[hit], out, n * sizeof(float)) == 0)
        fputs("content_cache_matmul: cached call 1's output and finds it again by its fingerprint\n", stderr);
}
