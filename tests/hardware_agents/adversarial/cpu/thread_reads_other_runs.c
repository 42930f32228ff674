// expect: passed
// problem: scale_shift
// why: read_other_runs.c from other threads: one started by a constructor when the library is
//      loaded (before the first call, as a library's worker pool would be), parked until the
//      kernel wakes it, and one started inside the call; each tries to open what other runs
//      left (runs/ under the checkout named by PYTHONPATH, the memory, the home and cache, /tmp,
//      /work). Anything either can open spoils the output, so `passed` means every thread's
//      reads were refused, the early one's as much as the late one's.
#include <dirent.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
static int readable(const char* p) {
    DIR* d = opendir(p);
    if (d) { closedir(d); return 1; }
    FILE* f = fopen(p, "r");
    if (f) { fclose(f); return 1; }
    return 0;
}
static void* try_reads(void* arg) {
    int leaks = 0;
    const char* pp = getenv("PYTHONPATH");
    char root[2048] = "";
    if (pp) { strncpy(root, pp, sizeof root - 1); root[strcspn(root, ":")] = 0; }
    const char* rel[] = {"runs", "runs/memory", "README.md", "tests", "benchmarks/results", ".venv/bin"};
    char p[4096];
    for (int i = 0; root[0] && i < 6; i++) { snprintf(p, sizeof p, "%s/%s", root, rel[i]); leaks += readable(p); }
    const char* abs_paths[] = {"/root", "/root/.cache/accelopt", "/home", "/tmp", "/work"};
    for (int i = 0; i < 5; i++) leaks += readable(abs_paths[i]);
    *(int*)arg = leaks;
    return NULL;
}
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static int go = 0, early_done = 0, early_leaks = 0, early_started = 0;
static void* early(void* unused) {
    (void)unused;
    pthread_mutex_lock(&mu);
    while (!go) pthread_cond_wait(&cv, &mu);
    pthread_mutex_unlock(&mu);
    int leaks = 0;
    try_reads(&leaks);
    pthread_mutex_lock(&mu);
    early_leaks = leaks;
    early_done = 1;
    pthread_cond_broadcast(&cv);
    pthread_mutex_unlock(&mu);
    return NULL;
}
__attribute__((constructor)) static void start_early(void) {
    pthread_t t;
    if (pthread_create(&t, NULL, early, NULL) == 0) { pthread_detach(t); early_started = 1; }
}
void kernel(const float* x, float* out) {
    int leaks = 0, late_leaks = 0;
    if (early_started) {
        pthread_mutex_lock(&mu);
        go = 1;
        pthread_cond_broadcast(&cv);
        while (!early_done) pthread_cond_wait(&cv, &mu);
        leaks += early_leaks;
        pthread_mutex_unlock(&mu);
    }
    pthread_t t;
    if (pthread_create(&t, NULL, try_reads, &late_leaks) == 0) { pthread_join(t, NULL); leaks += late_leaks; }
    for (long i = 0; i < (long)M * N; i++) out[i] = leaks ? -1.0f : 2.0f * x[i] + 1.0f;
}
