// expect: compile_error
// problem: scale_shift
// needle: the limit is 32 MiB
// why: a 40 MB blob in .data (`.fill`) makes a 40 MB shared library, which was kept in the build
//      cache for good and copied into every profile's work dir (before: passed with its 38 MiB
//      library; `.fill 240000000` made a 240 MB one). A library over 32 MiB is now a compile error, and the compiler's own
//      files are capped (RLIMIT_FSIZE, a 256 MiB tmpfs work dir).
__asm__(".section .data.blob,\"aw\"\n.globl accelopt_blob\naccelopt_blob:\n.fill 40000000, 1, 7\n.previous\n");
void kernel(const float* x, float* out) {
    #pragma omp parallel for
    for (long i = 0; i < (long)M * N; i++) out[i] = 2.0f * x[i] + 1.0f;
}
