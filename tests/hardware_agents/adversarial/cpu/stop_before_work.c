// expect: incorrect
// problem: scale_shift
// needle: never written
// why: stops its own process (the parent's "done" signal) at the start of a call, before
//      computing anything, hoping the clock stops there and the work happens after.
#include <signal.h>
#include <unistd.h>
void kernel(const float* x, float* out) {
    raise(SIGSTOP);
    for (long i = 0; i < (long)M * N; i++) out[i] = 2.0f * x[i] + 1.0f;
}
