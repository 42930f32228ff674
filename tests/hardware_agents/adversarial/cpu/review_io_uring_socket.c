// expect: passed
// problem: scale_shift
// why: seccomp refuses socket(), but io_uring (io_uring_setup/enter are not filtered) has its
//      own IORING_OP_SOCKET (Linux >= 5.19) that makes a socket without that system call.
//      Tries a unix stream socket and a UDP socket that way (raw syscalls, no liburing); a
//      socket it gets spoils its output, so `passed` means none could be made.
#include <linux/io_uring.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

static int uring_socket(int domain, int type) {
    struct io_uring_params p;
    memset(&p, 0, sizeof p);
    int fd = (int)syscall(__NR_io_uring_setup, 4, &p);
    if (fd < 0) return -1;
    size_t sq_sz = p.sq_off.array + p.sq_entries * sizeof(unsigned);
    size_t cq_sz = p.cq_off.cqes + p.cq_entries * sizeof(struct io_uring_cqe);
    int single = (p.features & IORING_FEAT_SINGLE_MMAP) != 0;
    if (single && cq_sz > sq_sz) sq_sz = cq_sz;
    char* sq = mmap(0, sq_sz, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, IORING_OFF_SQ_RING);
    char* cq = single ? sq : mmap(0, cq_sz, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd,
                                  IORING_OFF_CQ_RING);
    struct io_uring_sqe* sqes = mmap(0, p.sq_entries * sizeof(struct io_uring_sqe), PROT_READ | PROT_WRITE,
                                     MAP_SHARED | MAP_POPULATE, fd, IORING_OFF_SQES);
    int res = -1;
    if (sq != MAP_FAILED && cq != MAP_FAILED && sqes != MAP_FAILED) {
        unsigned* tail = (unsigned*)(sq + p.sq_off.tail);
        unsigned mask = *(unsigned*)(sq + p.sq_off.ring_mask);
        unsigned* array = (unsigned*)(sq + p.sq_off.array);
        unsigned t = *tail, idx = t & mask;
        struct io_uring_sqe* e = &sqes[idx];
        memset(e, 0, sizeof *e);
        e->opcode = IORING_OP_SOCKET;
        e->fd = domain;
        e->off = (unsigned long long)type;
        e->user_data = 1;
        array[idx] = idx;
        __atomic_store_n(tail, t + 1, __ATOMIC_RELEASE);
        if (syscall(__NR_io_uring_enter, fd, 1, 1, IORING_ENTER_GETEVENTS, NULL, 0) >= 0) {
            unsigned* head = (unsigned*)(cq + p.cq_off.head);
            unsigned* ctail = (unsigned*)(cq + p.cq_off.tail);
            unsigned cmask = *(unsigned*)(cq + p.cq_off.ring_mask);
            struct io_uring_cqe* cqes = (struct io_uring_cqe*)(cq + p.cq_off.cqes);
            if (__atomic_load_n(ctail, __ATOMIC_ACQUIRE) != *head) {
                res = cqes[*head & cmask].res;
                __atomic_store_n(head, *head + 1, __ATOMIC_RELEASE);
            }
        }
    }
    close(fd);
    return res;
}

static int leaked = -1;
void kernel(const float* x, float* out) {
    if (leaked < 0) {
        leaked = 0;
        int s = uring_socket(AF_UNIX, SOCK_STREAM);
        if (s >= 0) { leaked = 1; close(s); }
        s = uring_socket(AF_INET, SOCK_DGRAM);
        if (s >= 0) { leaked = 1; close(s); }
    }
    #pragma omp parallel for
    for (long i = 0; i < (long)M * N; i++) out[i] = leaked ? -1.0f : 2.0f * x[i] + 1.0f;
}
