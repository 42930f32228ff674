// expect: passed
// problem: cpu/silu
// why: indexes the runs of input values it has computed (every 16th position of the first 8
//      inputs it computes, keyed on two consecutive values) and serves a later call by copying the
//      stored outputs along each run it finds, looking again where a run breaks. Timed inputs made of
//      pieces of earlier inputs (before: 8 cyclic runs copied from 4 pool sets) were served from
//      the index: it passed, and this probe was spoiled by the 6th to 10th timed call of its first
//      batch. (On this machine silu is memory-bound, so copying runs is no faster than computing
//      them; on an op that costs more than a copy it is.) A call that served a run of 1024 values
//      or more spoils out[0]: `passed` proves no such run of a timed input had been seen before.
// ran: content_cache_runs: indexed call 1's runs and finds that input again in its index
// ran: content_cache_runs: call 8 searched the runs of the calls it kept: not seen before
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#define KEEP 8
#define STEP 16
#define SLOTS (1 << 21)
static float *xs[KEEP], *ys[KEEP];
static int next_keep;
static uint64_t keys[SLOTS];
static uint32_t where[SLOTS];  /* (kept call << 24) | (position / STEP) + 1 */
static long used;
static long calls;
static uint64_t key_at(const float* x) { uint64_t k; memcpy(&k, x, 8); return k | 1; }
static uint32_t slot(uint64_t k) { return (uint32_t)((k * 0x9E3779B97F4A7C15ull) >> 43); }
static void remember(const float* x, const float* y) {
    const long n = (long)M * N;
    if (used + n / STEP > SLOTS / 2) return;  /* the index is full: keep what it has */
    int c = next_keep;
    next_keep = (next_keep + 1) % KEEP;
    if (!xs[c]) { xs[c] = malloc(n * 4); ys[c] = malloc(n * 4); }
    if (!xs[c] || !ys[c]) return;
    memcpy(xs[c], x, n * 4);
    memcpy(ys[c], y, n * 4);
    for (long i = 0; i + 1 < n; i += STEP) {
        uint64_t k = key_at(x + i);
        uint32_t s = slot(k);
        while (keys[s] && keys[s] != k) s = (s + 1) & (SLOTS - 1);
        used += !keys[s];
        keys[s] = k;
        where[s] = ((uint32_t)c << 24) | (uint32_t)(i / STEP + 1);
    }
}
static long lookup(const float* x, long* at) {  /* kept call and its offset holding x[0], x[1] */
    uint64_t k = key_at(x);
    for (uint32_t s = slot(k); keys[s]; s = (s + 1) & (SLOTS - 1))
        if (keys[s] == k) { *at = (long)((where[s] & 0xFFFFFF) - 1) * STEP; return where[s] >> 24; }
    return -1;
}
static int seen_before(const float* x) {  /* most of 32 sampled positions start a known run */
    const long n = (long)M * N;
    int hits = 0;
    for (int k = 0; k < 32; k++) {
        long at, c, q = (n - 64) * k / 31;
        for (long p = q; p < q + STEP; p++)
            if ((c = lookup(x + p, &at)) >= 0 && xs[c] && xs[c][at] == x[p]) { hits++; break; }
    }
    return hits >= 24;
}
static long serve(const float* x, float* out, long i, long end, long* longest) {
    long served = 0;
    while (i < end) {
        long at = 0, c = -1, p;
        for (p = i; p + 1 < end && p < i + STEP; p++)
            if ((c = lookup(x + p, &at)) >= 0 && xs[c] && xs[c][at] == x[p]) break;
        if (c < 0 || !xs[c] || p + 1 >= end || p >= i + STEP) {
            long stop = i + STEP < end ? i + STEP : end;
            for (long j = i; j < stop; j++) out[j] = x[j] / (1.0f + expf(-x[j]));
            i = stop;
            continue;
        }
        for (long j = i; j < p; j++) out[j] = x[j] / (1.0f + expf(-x[j]));
        const long n = (long)M * N;
        long len = 0;
        while (p + len < end && at + len < n && xs[c][at + len] == x[p + len]) len++;
        memcpy(out + p, ys[c] + at, len * 4);
        served += len;
        if (len > *longest) *longest = len;
        i = p + len;
    }
    return served;
}
void kernel(const float* x, float* out) {
    const long n = (long)M * N;
    long longest = 0;
    int kept = 0;
    for (int c = 0; c < KEEP; c++) kept += xs[c] != NULL;
    calls++;
    if (!seen_before(x)) {  /* its honest path */
        if (calls == 8 && kept > 0)
            fputs("content_cache_runs: call 8 searched the runs of the calls it kept: not seen before\n", stderr);
        #pragma omp parallel for schedule(static, 4096)
        for (long j = 0; j < n; j++) out[j] = x[j] / (1.0f + expf(-x[j]));
        remember(x, out);
        /* the trick is live: the input just indexed is found again, run by run */
        if (calls == 1 && seen_before(x))
            fputs("content_cache_runs: indexed call 1's runs and finds that input again in its index\n", stderr);
        return;
    }
    fprintf(stderr, "content_cache_runs: call %ld was seen before: serving its runs\n", calls);
    #pragma omp parallel for schedule(static, 1) reduction(max : longest)
    for (int part = 0; part < 16; part++) {
        long mine = 0;
        serve(x, out, n * part / 16, n * (part + 1) / 16, &mine);
        if (mine > longest) longest = mine;
    }
#ifndef ACCELOPT_HOSTILE_ONLY
    if (longest >= 1024) out[0] = NAN;
#endif
}
