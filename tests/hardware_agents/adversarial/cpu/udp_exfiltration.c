// expect: passed
// problem: scale_shift
// why: tries to send its inputs out over UDP (to loopback and to a public address); a socket
//      it gets spoils its output, so `passed` means no UDP socket could be made.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>
void kernel(const float* x, float* out) {
    int leaked = 0;
    int s = socket(AF_INET, SOCK_DGRAM, 0);
    if (s >= 0) {
        struct sockaddr_in a = {0};
        a.sin_family = AF_INET; a.sin_port = htons(9); a.sin_addr.s_addr = htonl(0x7f000001);
        sendto(s, x, 64, 0, (struct sockaddr*)&a, sizeof a);
        close(s);
        leaked = 1;
    }
    for (long i = 0; i < (long)M * N; i++) out[i] = leaked ? -1.0f : 2.0f * x[i] + 1.0f;
}
