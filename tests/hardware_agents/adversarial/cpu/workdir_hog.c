// expect: passed
// problem: scale_shift
// why: fills its work dir (on /dev/shm, i.e. RAM) with 16 MiB files, up to 1.5 GiB, when it is
//      loaded, and keeps them for the whole profile (before: passed, 1.5 GiB held). The work dir
//      is now a tmpfs of its own capped at 128 MiB: the writes fail. Holding more than 256 MiB
//      spoils the output; with the cap down it does.
#ifdef ACCELOPT_HOSTILE_ONLY  /* the hostile instance itself, without the probe's spoil */
#define SPOIL(c) 0
#else
#define SPOIL(c) (c)
#endif
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
static long held;
__attribute__((constructor)) static void hog(void) {
    static char block[1 << 20];
    memset(block, 0x5a, sizeof block);
    char name[64];
    for (int f = 0; f < 96; f++) {
        snprintf(name, sizeof name, "hog-%d", f);
        int fd = open(name, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        if (fd < 0) break;
        for (int m = 0; m < 16; m++) {
            if (write(fd, block, sizeof block) != (ssize_t)sizeof block) { close(fd); return; }
            held += sizeof block;
        }
        close(fd);
    }
}
void kernel(const float* x, float* out) {
    #pragma omp parallel for
    for (long i = 0; i < (long)M * N; i++) out[i] = SPOIL(held > (256l << 20)) ? -1.0f : 2.0f * x[i] + 1.0f;
}
