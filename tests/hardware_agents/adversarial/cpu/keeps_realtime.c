// expect: passed
// problem: scale_shift
// why: the parent times every command at real-time priority (SCHED_FIFO) where the host allows
//      it; the kernel tries to make more of that: to raise its own priority above it (and its
//      nice value below 0), and from a thread it starts inside a call (which inherits the
//      interval's priority in a server that cannot fork, and is reset with the others at the
//      stop). Raising is refused (no CAP_SYS_NICE and RLIMIT_RTPRIO 0 in the sandbox uid), for
//      the thread too; any success spoils the output.
// ran: keeps_realtime: tried to raise its own real-time priority and nice value: refused
// ran: keeps_realtime: a thread it started inside a call could not raise its priority either
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <sys/resource.h>
#ifndef SCHED_RESET_ON_FORK
#define SCHED_RESET_ON_FORK 0x40000000
#endif
static int calls;
/* every way up it knows; whether any took: a priority above 1, real time it was not given, a
   reset-on-fork it was given and cleared, a nice value below 0 */
static int try_raise(void) {
    int given = sched_getscheduler(0);
    struct sched_param high = {.sched_priority = 99}, above = {.sched_priority = 3}, one = {.sched_priority = 1};
    sched_setscheduler(0, SCHED_FIFO, &high);
    sched_setscheduler(0, SCHED_RR, &above); /* above the parent's watchdog (2) */
    sched_setscheduler(0, SCHED_FIFO, &one); /* real time if it had none; reset-on-fork cleared if it had */
    int raised = setpriority(PRIO_PROCESS, 0, -20) == 0;
    struct sched_param now;
    sched_getparam(0, &now);
    int policy = sched_getscheduler(0);
    raised |= now.sched_priority > 1;
    raised |= (given & ~SCHED_RESET_ON_FORK) == SCHED_OTHER && (policy & ~SCHED_RESET_ON_FORK) != SCHED_OTHER;
    raised |= (given & SCHED_RESET_ON_FORK) && !(policy & SCHED_RESET_ON_FORK);
    return raised;
}
static void* probe(void* p) {
    *(int*)p = try_raise();
    return 0;
}
void kernel(const float* x, float* out) {
    int raised = try_raise();
    int thread_raised = 1;
    pthread_t t;
    if (pthread_create(&t, 0, probe, &thread_raised) == 0) pthread_join(t, 0);
    if (++calls == 1) {
        if (!raised) fprintf(stderr, "keeps_realtime: tried to raise its own real-time priority and nice value: refused\n");
        if (!thread_raised) fprintf(stderr, "keeps_realtime: a thread it started inside a call could not raise its priority either\n");
    }
    float spoil = (raised || thread_raised) ? 1.0f : 0.0f;
    for (long i = 0; i < (long)M * N; i++) out[i] = 2.0f * x[i] + 1.0f + spoil;
}
