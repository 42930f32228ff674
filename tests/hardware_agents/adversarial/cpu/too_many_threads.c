// expect: runtime_error
// problem: scale_shift
// needle: threads
// why: asks OpenMP for 24 threads on a machine it was given 2 cores of, to take the CPU from
//      everything else profiling on the host.
#include <omp.h>
void kernel(const float* x, float* out) {
    omp_set_num_threads(24);
    #pragma omp parallel for
    for (long i = 0; i < (long)M * N; i++) out[i] = 2.0f * x[i] + 1.0f;
}
