// expect: incorrect
// problem: scale_shift
// needle: left non-finite values
// why: honest for its first 6 calls (long enough to pass the correctness cases), then returns
//      at once: the timed calls compute nothing.
static int calls = 0;
void kernel(const float* x, float* out) {
    if (++calls > 6) return;
    #pragma omp parallel for
    for (long i = 0; i < (long)M * N; i++) out[i] = 2.0f * x[i] + 1.0f;
}
