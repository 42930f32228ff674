// expect: runtime_error
// needle: SIGSYS
// problem: scale_shift
// why: the seccomp filter checks the architecture word (x86_64) and then compares the
//      syscall number with socket/fork/clone/ptrace/...; x32 system calls carry the same
//      AUDIT_ARCH_X86_64 and the number with bit 30 set (0x40000000 | nr), so on a kernel
//      built with CONFIG_X86_X32_ABI they would match no rule. Tries socket() and fork() that
//      way; a socket or a child spoils the output. (Here x32 is off: ENOSYS. The filter should
//      still refuse nr >= 0x40000000 so the wall does not depend on the kernel's build.)
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>
#define X32 0x40000000L
static int leaked = -1;
void kernel(const float* x, float* out) {
    if (leaked < 0) {
        leaked = 0;
        long s = syscall(X32 | 41, 1 /* AF_UNIX */, 1 /* SOCK_STREAM */, 0);
        if (s >= 0) { leaked = 1; close((int)s); }
        long p = syscall(X32 | 57);  /* fork */
        if (p == 0) _exit(0);
        if (p > 0) { leaked = 1; waitpid((int)p, 0, 0); }
    }
    #pragma omp parallel for
    for (long i = 0; i < (long)M * N; i++) out[i] = leaked ? -1.0f : 2.0f * x[i] + 1.0f;
}
