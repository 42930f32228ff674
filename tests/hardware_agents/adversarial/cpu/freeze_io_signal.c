// expect: passed
// problem: cpu/silu
// why: asks for SIGCONT instead of SIGIO when one of its pipes becomes readable (fcntl F_SETOWN,
//      F_SETSIG, O_ASYNC on every pipe it holds, the command pipe among them): the parent's next
//      command would continue the process before the parent does, and it could start the batch
//      off the clock (before: F_SETSIG was allowed). F_SETSIG now fails (seccomp profile `stoppable`); a signal it got set up
//      spoils out[0]. With that wall down the freeze check sees the foreign continue.
#ifdef ACCELOPT_HOSTILE_ONLY  /* the hostile instance itself, without the probe's spoil */
#define SPOIL(c) 0
#else
#define SPOIL(c) (c)
#endif
#define _GNU_SOURCE
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>
static int armed;
__attribute__((constructor)) static void arm(void) {
    for (int fd = 0; fd < 256; fd++) {
        struct stat st;
        if (fstat(fd, &st) != 0 || !S_ISFIFO(st.st_mode)) continue;
        if (fcntl(fd, F_SETOWN, getpid()) != 0 || fcntl(fd, F_SETSIG, SIGCONT) != 0) continue;
        int fl = fcntl(fd, F_GETFL);
        if (fl >= 0 && fcntl(fd, F_SETFL, fl | O_ASYNC) == 0) armed = 1;
    }
}
void kernel(const float* x, float* out) {
    #pragma omp parallel for schedule(static, 4096)
    for (long i = 0; i < (long)M * N; i++) out[i] = x[i] / (1.0f + expf(-x[i]));
    if (SPOIL(armed)) out[0] = NAN;
}
