// expect: passed
// problem: scale_shift
// why: seccomp refuses socket(), not socketpair(): socketpair(AF_UNIX, SOCK_DGRAM) gives an
//      unbound datagram socket, and sendto()/connect() on it reach any pathname unix datagram
//      socket the sandbox uid may write (Landlock ABI <= 7 does not govern connecting to
//      unix sockets): /dev/log, /run/systemd/journal/socket (0666), any service's socket.
//      A socket it gets spoils its output, so `passed` means none could be made.
#include <sys/socket.h>
#include <unistd.h>
static int leaked = -1;
void kernel(const float* x, float* out) {
    if (leaked < 0) {
        int sv[2];
        leaked = socketpair(AF_UNIX, SOCK_DGRAM, 0, sv) == 0;
        if (leaked) { close(sv[0]); close(sv[1]); }
    }
    #pragma omp parallel for
    for (long i = 0; i < (long)M * N; i++) out[i] = leaked ? -1.0f : 2.0f * x[i] + 1.0f;
}
