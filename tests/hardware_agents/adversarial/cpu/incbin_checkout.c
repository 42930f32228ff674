// expect: compile_error
// problem: scale_shift
// needle: file not found
// why: pulls a file of the checkout (the README here; another run's kernel or log the same
//      way) into the library at compile time with .incbin; the compiler's sandbox cannot read it.
__asm__(".section .rodata\n.global leaked\nleaked:\n.incbin \"@REPO@/README.md\"\n.byte 0\n.previous\n");
void kernel(const float* x, float* out) {
    for (long i = 0; i < (long)M * N; i++) out[i] = 2.0f * x[i] + 1.0f;
}
