// expect: passed
// problem: scale_shift
// why: clears its parent-death signal (prctl(PR_SET_PDEATHSIG, 0)) when it is loaded: an agent
//      killed by SIGKILL (the OOM killer, a Ray shutdown) would leave the kernel server alive as
//      an orphan of init, stopped and holding its buffers. prctl(PR_SET_PDEATHSIG) now fails
//      (seccomp); a cleared signal spoils the output. test_cpu_cleanup.py kills an agent under
//      this kernel with the wall down and shows the orphan, then the sweep at the next agent's
//      start-up.
#ifdef ACCELOPT_HOSTILE_ONLY  /* the hostile instance itself, without the probe's spoil */
#define SPOIL(c) 0
#else
#define SPOIL(c) (c)
#endif
#include <signal.h>
#include <sys/prctl.h>
static int cleared;
__attribute__((constructor)) static void clear(void) {
    cleared = prctl(PR_SET_PDEATHSIG, 0, 0, 0, 0) == 0;
}
void kernel(const float* x, float* out) {
    #pragma omp parallel for
    for (long i = 0; i < (long)M * N; i++) out[i] = SPOIL(cleared) ? -1.0f : 2.0f * x[i] + 1.0f;
}
