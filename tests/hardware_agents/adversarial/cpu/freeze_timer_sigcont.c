// expect: passed
// problem: cpu/silu
// why: a POSIX timer (timer_create, SIGEV_SIGNAL, signal SIGCONT), armed again by every call to
//      fire 20 ms after it, continues the kernel's process while the parent holds it stopped
//      between timed batches (a stop ends at SIGCONT, whoever sends it). Two helper
//      threads then find the input region in /proc/self/maps (memfd:accelopt-in), compute silu of
//      every buffer set the parent has written, and a timed call whose inputs they have done
//      copies the stored output. Before the freeze check it passed, having run 596 ms of CPU time
//      in 3 of the 4 stops measured while the harness held it "stopped" (it raced the handshake
//      into a timeout when the machine was loaded). timer_create now fails (seccomp profile
//      `stoppable`); an armed timer spoils out[0], so `passed` proves it was refused. With that
//      wall down the freeze check catches it (test_cpu_adversarial.py: "ran while it was stopped").
#define _GNU_SOURCE
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#define MAXSETS 256
static const float* in_base;
static long stride, nsets;
static float* cache[MAXSETS];
static volatile uint64_t done[MAXSETS];
static int armed;
static timer_t timer;
static volatile int in_call;  /* the helpers keep off the cores while a call runs */
static uint64_t fp(const float* x) {
    const long n = (long)M * N;
    uint64_t h = 1469598103934665603ull;
    for (int s = 0; s < 64; s++) { uint32_t b; memcpy(&b, &x[(n - 1) * s / 63], 4); h = (h ^ b) * 1099511628211ull; }
    return h | 1;
}
static void* helper(void* arg) {
    const long first = (long)arg, n = (long)M * N;
    for (;;) {
        for (long s = first; s < nsets; s += 2) {
            while (in_call) {
                struct timespec d = {0, 50000};
                nanosleep(&d, 0);
            }
            const float* x = in_base + s * stride;
            uint64_t f = fp(x);
            if (f == done[s]) continue;
            done[s] = 0;
            if (!cache[s] && !(cache[s] = malloc(n * sizeof(float)))) continue;
            for (long i = 0; i < n; i++) cache[s][i] = x[i] / (1.0f + expf(-x[i]));
            if (fp(x) == f) done[s] = f;
        }
        struct timespec d = {0, 100000};
        nanosleep(&d, 0);
    }
    return 0;
}
static void on_cont(int sig) { (void)sig; }
__attribute__((constructor)) static void arm(void) {
    FILE* maps = fopen("/proc/self/maps", "r");
    char line[512];
    unsigned long lo = 0, hi = 0;
    while (maps && fgets(line, sizeof line, maps))
        if (strstr(line, "memfd:accelopt-in")) sscanf(line, "%lx-%lx", &lo, &hi);
    if (maps) fclose(maps);
    if (!lo) return;
    in_base = (const float*)lo;
    stride = ((long)M * N * 4 + 63) / 64 * 64 / 4;
    nsets = (long)(hi - lo) / 4 / stride;
    if (nsets > MAXSETS) nsets = MAXSETS;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_cont;
    sa.sa_flags = SA_RESTART;
    sigaction(SIGCONT, &sa, 0);
    struct sigevent sev;
    memset(&sev, 0, sizeof sev);
    sev.sigev_notify = SIGEV_SIGNAL;
    sev.sigev_signo = SIGCONT;
    if (timer_create(CLOCK_MONOTONIC, &sev, &timer) != 0) return;
    armed = 1;
    for (long h = 0; h < 2; h++) {
        pthread_t th;
        if (pthread_create(&th, 0, helper, (void*)h) == 0) pthread_detach(th);
    }
}
void kernel(const float* x, float* out) {
    const long n = (long)M * N;
    in_call = 1;
    long s = in_base ? (long)(x - in_base) / stride : -1;
    if (s >= 0 && s < nsets && done[s] && done[s] == fp(x)) {
        memcpy(out, cache[s], n * sizeof(float));
    } else {
        #pragma omp parallel for schedule(static, 4096)
        for (long i = 0; i < n; i++) out[i] = x[i] / (1.0f + expf(-x[i]));
    }
    if (armed) {
        struct itimerspec its = {{0, 0}, {0, 20000000}};  /* once, 20 ms after the last call of a batch */
        timer_settime(timer, 0, &its, 0);
    }
    in_call = 0;
#ifndef ACCELOPT_HOSTILE_ONLY
    if (armed) out[0] = NAN;
#endif
}
