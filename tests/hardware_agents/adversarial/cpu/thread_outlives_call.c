// expect: incorrect
// problem: scale_shift
// needle: never written
// why: returns at once and leaves the work to a detached thread, hoping the clock stops at
//      the return while the work goes on; the process is frozen when the batch ends, so the
//      last call's output is still NaN when the parent reads it.
#include <pthread.h>
#include <stdlib.h>
#include <time.h>
struct job { const float* x; float* out; };
static void* work(void* p) {
    struct job* j = p;
    struct timespec d = {0, 2000000};
    nanosleep(&d, 0);
    for (long i = 0; i < (long)M * N; i++) j->out[i] = 2.0f * j->x[i] + 1.0f;
    free(j);
    return 0;
}
void kernel(const float* x, float* out) {
    struct job* j = malloc(sizeof *j);
    j->x = x; j->out = out;
    pthread_t t;
    if (pthread_create(&t, 0, work, j) == 0) pthread_detach(t);
}
