// expect: incorrect
// problem: scale_shift
// needle: timed call is wrong
// why: remembers the output per input buffer address (buffers are reused with new contents).
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
static const float* seen[64]; static float saved[64][M * N]; static int nseen = 0;
void kernel(const float* x, float* out) {
    for (int s = 0; s < nseen; s++) if (seen[s] == x) { memcpy(out, saved[s], sizeof(saved[s])); return; }int slot = nseen < 64 ? nseen++ : 63; seen[slot] = x;
    #pragma omp parallel for
    for (long i = 0; i < (long)M * N; i++) { out[i] = 2.0f * x[i] + 1.0f; saved[slot][i] = out[i]; }
}
