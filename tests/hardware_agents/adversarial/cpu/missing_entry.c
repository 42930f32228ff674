// expect: compile_error
// problem: scale_shift
// needle: kernel
// why: does not export the entry point.
void not_the_kernel(void) {}
