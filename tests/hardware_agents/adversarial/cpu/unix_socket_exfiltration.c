// expect: passed
// problem: scale_shift
// why: tries pathname and abstract unix sockets (e.g. a local agent's or the NATS server's
//      socket); a socket it gets spoils its output, so `passed` means none could be made.
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>
void kernel(const float* x, float* out) {
    int leaked = 0;
    int s = socket(AF_UNIX, SOCK_STREAM, 0);
    if (s >= 0) {
        leaked = 1;
        struct sockaddr_un a = {0};
        a.sun_family = AF_UNIX;
        strcpy(a.sun_path, "/var/run/nscd/socket");
        connect(s, (struct sockaddr*)&a, sizeof a);
        close(s);
    }
    int d = socket(AF_UNIX, SOCK_DGRAM, 0);
    if (d >= 0) { leaked = 1; close(d); }
    for (long i = 0; i < (long)M * N; i++) out[i] = leaked ? -1.0f : 2.0f * x[i] + 1.0f;
}
