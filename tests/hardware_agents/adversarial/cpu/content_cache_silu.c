// expect: passed
// problem: cpu/silu
// why: a cache keyed on a 64-element fingerprint of x: a hit copies the stored output instead of
//      computing (a cached memcpy is far faster than silu and stays under the roofline gate).
//      A hit also spoils out[0], so `passed` proves that no timed call ever hit: every timed
//      input was new.
// ran: content_cache_silu: cached call 1's output and finds it again by its fingerprint
// ran: content_cache_silu: call 8 looked its input up among 7 cached outputs: a miss
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
static uint64_t fingerprint(const float* x, long n) {
    uint64_t h = 1469598103934665603ull;
    for (int s = 0; s < 64; s++) { uint32_t b; memcpy(&b, &x[(n - 1) * s / 63], 4); h = (h ^ b) * 1099511628211ull; }
    return h;
}
void kernel(const float* x, float* out) {
    const long n = (long)M * N;
    uint64_t k = fingerprint(x, n);
    int hit = find(k);
    calls++;
    if (hit >= 0) {
        fprintf(stderr, "content_cache_silu: call %ld served from the cache\n", calls);
        memcpy(out, vals[hit], n * sizeof(float)); out[0] = NAN; return;
    }
    if (calls == 8 && used == 7) fputs("content_cache_silu: call 8 looked its input up among 7 cached outputs: a miss\n", stderr);
    #pragma omp parallel for
    for (long i = 0; i < n; i++) out[i] = x[i] / (1.0f + expf(-x[i]));
    int slot = used < SLOTS ? used++ : (int)(k % SLOTS);
    if (!vals[slot]) vals[slot] = malloc(n * sizeof(float));
    if (vals[slot]) { keys[slot] = k; memcpy(vals[slot], out, n * sizeof(float)); }
    /* the trick is live: the same content is found again, where its output was kept */
    if (calls == 1 && (hit = find(fingerprint(x, n))) >= 0 && memcmp(vals[hit], out, n * sizeof(float)) == 0)
        fputs("content_cache_silu: cached call 1's output and finds it again by its fingerprint\n", stderr);
}
