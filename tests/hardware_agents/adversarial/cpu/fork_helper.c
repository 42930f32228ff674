// expect: passed
// problem: scale_shift
// why: forks a helper process (which would go on running while the kernel's process is frozen
//      between timed batches, and could precompute); a fork that succeeds spoils the output.
#include <sys/wait.h>
#include <unistd.h>
void kernel(const float* x, float* out) {
    pid_t p = fork();
    int forked = p >= 0;
    if (p == 0) _exit(0);
    if (p > 0) waitpid(p, 0, 0);
    for (long i = 0; i < (long)M * N; i++) out[i] = forked ? -1.0f : 2.0f * x[i] + 1.0f;
}
