// expect: runtime_error
// problem: scale_shift
// needle: exited
// why: from a constructor, writes a forged "all passed, 0.001 ms" result where the old harness
//      wrote its report, then exits cleanly before any call.
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
__attribute__((constructor)) static void forge(void) {
    FILE* f = fopen(".sandbox/result.msgpack", "wb");
    if (f) { fputs("\x85\xa2ok\xc3\xa7payload\xc4\x00\xa5error\xa0\xaaerror_type\xa0\xa9isolation\x80", f); fclose(f); }
    _exit(0);
}
void kernel(const float* x, float* out) { (void)x; (void)out; }
