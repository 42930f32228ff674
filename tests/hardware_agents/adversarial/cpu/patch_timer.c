// expect: passed
// problem: scale_shift
// min_ms: 15
// why: from a constructor, reaches the Python interpreter of its own process through the C
//      API and freezes every clock it can find (time.perf_counter*, monotonic*, time*), then
//      burns 20 ms per call; a believed clock inside the kernel's process would report ~0 ms.
//      It says on its stderr that the clocks are frozen (checked in Python: all it can say).
// ran: patch_timer: froze time.perf_counter, monotonic and time (and their _ns)
#include <dlfcn.h>
#include <time.h>
__attribute__((constructor)) static void patch(void) {
    int (*ensure)(void) = (int (*)(void))dlsym(RTLD_DEFAULT, "PyGILState_Ensure");
    void (*release)(int) = (void (*)(int))dlsym(RTLD_DEFAULT, "PyGILState_Release");
    int (*run)(const char*) = (int (*)(const char*))dlsym(RTLD_DEFAULT, "PyRun_SimpleString");
    if (!ensure || !release || !run) return;
    int g = ensure();
    run("import time\n"
        "for n in ('perf_counter','perf_counter_ns','monotonic','monotonic_ns','time','time_ns'):\n"
        "    setattr(time, n, (lambda: 0))\n"
        "if all(getattr(time, n)() == 0 for n in ('perf_counter', 'perf_counter_ns', 'monotonic',\n"
        "                                          'monotonic_ns', 'time', 'time_ns')):\n"
        "    import sys\n"
        "    print('patch_timer: froze time.perf_counter, monotonic and time (and their _ns)',\n"
        "          file=sys.stderr, flush=True)\n");
    release(g);
}
void kernel(const float* x, float* out) {
    struct timespec t0, t;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    do clock_gettime(CLOCK_MONOTONIC, &t);
    while ((t.tv_sec - t0.tv_sec) * 1e3 + (t.tv_nsec - t0.tv_nsec) / 1e6 < 20.0);
    for (long i = 0; i < (long)M * N; i++) out[i] = 2.0f * x[i] + 1.0f;
}
