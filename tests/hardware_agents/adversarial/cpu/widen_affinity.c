// expect: passed
// problem: cpu/mamba
// why: widens its CPU mask to every CPU of the machine (sched_setaffinity) and runs one thread per
//      CPU inside each call, joined before it returns, so the thread count sampled after a batch
//      looks normal: an agent that gave it fewer cores than the machine has timed it on all of
//      them (before, agent threads=1 on 2 cores: passed). sched_setaffinity now fails (seccomp
//      profile `stoppable`; the server is pinned to the cores it was given); a wider mask it got
//      spoils its output. With that wall down the judge sees the wider mask and more CPU time than
//      wall x cores given.
#define _GNU_SOURCE
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <stddef.h>
#include <unistd.h>
#ifdef ACCELOPT_HOSTILE_ONLY  /* the hostile instance itself, without the probe's spoil */
#define SPOIL(c) 0
#else
#define SPOIL(c) (c)
#endif
struct part { const float *delta, *u, *a, *b, *c; float* out; int lo, hi; };
static void* work(void* p) {
    struct part* w = p;
    for (int ch = w->lo; ch < w->hi; ch++) {
        float* o = w->out + (size_t)ch * M;
        const float* dl = w->delta + (size_t)ch * M;
        const float* uu = w->u + (size_t)ch * M;
        for (int i = 0; i < M; i++) o[i] = 0.0f;
        for (int s = 0; s < S; s++) {
            float as = w->a[(size_t)ch * S + s];
            float h = 0.0f;
            for (int i = 0; i < M; i++) {
                h = expf(dl[i] * as) * h + dl[i] * w->b[(size_t)s * M + i] * uu[i];
                o[i] += w->c[(size_t)s * M + i] * h;
            }
        }
    }
    return 0;
}
void kernel(const float* delta, const float* u, const float* a, const float* b, const float* c,
            float* out) {
    cpu_set_t all, before, after;
    CPU_ZERO(&all);
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    for (int i = 0; i < ncpu && i < 64; i++) CPU_SET(i, &all);
    sched_getaffinity(0, sizeof before, &before);
    sched_setaffinity(0, sizeof all, &all);
    sched_getaffinity(0, sizeof after, &after);
    int widened = CPU_COUNT(&after) > CPU_COUNT(&before);
    int k = CPU_COUNT(&after);
    if (k < 1) k = 1;
    if (k > 64) k = 64;
    pthread_t th[64];
    struct part parts[64];
    for (int t = 0; t < k; t++) {
        parts[t] = (struct part){delta, u, a, b, c, out, C * t / k, C * (t + 1) / k};
        if (t) pthread_create(&th[t], 0, work, &parts[t]);
    }
    work(&parts[0]);
    for (int t = 1; t < k; t++) pthread_join(th[t], 0);
    if (SPOIL(widened)) out[0] = NAN;
}
