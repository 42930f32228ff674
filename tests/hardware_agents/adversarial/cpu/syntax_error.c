// expect: compile_error
// problem: scale_shift
// needle: error
// why: is not C.
void kernel(const float* x, float* out) { this is not C; }
