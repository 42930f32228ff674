// expect: passed
// problem: scale_shift
// why: tries to swamp the trusted side through its log: ignores SIGXFSZ and writes 24 MiB of
//      long lines and control bytes to stderr on its first call, then computes honestly. The
//      file-size limit stops the writes at 16 MiB, and the parent keeps only the head of the
//      log (printable, 40 lines, long tokens redacted): the profile must still pass.
// ran: review_stderr_flood: flooding stderr
// ran: [... output truncated ...]
#include <signal.h>
#include <string.h>
#include <unistd.h>
static int flooded = 0;
void kernel(const float* x, float* out) {
    if (!flooded) {
        flooded = 1;
        signal(SIGXFSZ, SIG_IGN);
        static char chunk[1 << 16];
        memset(chunk, 'A', sizeof chunk);
        for (size_t i = 0; i < sizeof chunk; i += 997) chunk[i] = (i % 3) ? '\n' : '\x1b';
        static const char mark[] = "review_stderr_flood: flooding stderr\n";
        ssize_t said = write(2, mark, sizeof mark - 1);  /* then the flood, which the parent cuts */
        for (int k = 0; said > 0 && k < 384; k++)
            if (write(2, chunk, sizeof chunk) < 0) break;
    }
    #pragma omp parallel for
    for (long i = 0; i < (long)M * N; i++) out[i] = 2.0f * x[i] + 1.0f;
}
