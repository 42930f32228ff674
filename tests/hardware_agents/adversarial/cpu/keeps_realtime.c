// expect: passed
// problem: scale_shift
// why: the parent times every command at real-time priority (SCHED_FIFO) where the host allows
//      it; the kernel tries to make more of that: to raise its own priority above it (and its
//      nice value below 0), and to carry the priority past the interval in a thread it starts
//      inside a call. Raising is refused (no CAP_SYS_NICE in the sandbox uid), and the interval's
//      priority is reset on fork, so the thread runs as an ordinary one; either success spoils
//      the output.
// ran: keeps_realtime: tried to raise its own real-time priority and nice value: refused
// ran: keeps_realtime: a thread it started inside a call ran at ordinary priority
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <sys/resource.h>
#ifndef SCHED_RESET_ON_FORK
#define SCHED_RESET_ON_FORK 0x40000000
#endif
static int calls;
static void* probe(void* p) {
    *(int*)p = sched_getscheduler(0) & ~SCHED_RESET_ON_FORK;
    return 0;
}
void kernel(const float* x, float* out) {
    struct sched_param high = {.sched_priority = 99}, above = {.sched_priority = 3}, same = {.sched_priority = 1};
    int raised = sched_setscheduler(0, SCHED_FIFO, &high) == 0;
    raised |= sched_setscheduler(0, SCHED_RR, &above) == 0;  /* above the parent's watchdog (2) */
    raised |= sched_setscheduler(0, SCHED_FIFO, &same) == 0;  /* its own level, without reset-on-fork */
    raised |= setpriority(PRIO_PROCESS, 0, -20) == 0;
    int policy = -1;
    pthread_t t;
    if (pthread_create(&t, 0, probe, &policy) == 0) pthread_join(t, 0);
    int kept = policy != SCHED_OTHER;
    if (++calls == 1) {
        if (!raised) fprintf(stderr, "keeps_realtime: tried to raise its own real-time priority and nice value: refused\n");
        if (!kept) fprintf(stderr, "keeps_realtime: a thread it started inside a call ran at ordinary priority\n");
    }
    float spoil = (raised || kept) ? 1.0f : 0.0f;
    for (long i = 0; i < (long)M * N; i++) out[i] = 2.0f * x[i] + 1.0f + spoil;
}
