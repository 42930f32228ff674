// expect: runtime_error
// problem: scale_shift
// needle: read-only
// why: after the correctness calls, scribbles over its input (e.g. to leave a marker for the
//      next call, or to run in place); inputs are mapped read-only, so the write faults.
static int calls = 0;
void kernel(const float* x, float* out) {
    if (++calls > 6) ((float*)x)[0] = 0.0f;
    for (long i = 0; i < (long)M * N; i++) out[i] = 2.0f * x[i] + 1.0f;
}
