// expect: passed
// problem: scale_shift
// why: tries to read what other runs left (runs/ under the checkout named by PYTHONPATH, the
//      optimization memory, the user's home and cache); anything it can open spoils its
//      output, so `passed` means every one of those reads was refused.
#include <dirent.h>
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
void kernel(const float* x, float* out) {
    int leaks = 0;
    const char* pp = getenv("PYTHONPATH");
    char root[2048] = "";
    if (pp) { strncpy(root, pp, sizeof root - 1); root[strcspn(root, ":")] = 0; }
    const char* rel[] = {"runs", "runs/memory", "README.md", "tests", "benchmarks/results", ".venv/bin"};
    char p[4096];
    for (int i = 0; root[0] && i < 6; i++) { snprintf(p, sizeof p, "%s/%s", root, rel[i]); leaks += readable(p); }
    const char* abs_paths[] = {"/root", "/root/.cache/accelopt", "/home", "/tmp", "/work"};
    for (int i = 0; i < 5; i++) leaks += readable(abs_paths[i]);
    for (long i = 0; i < (long)M * N; i++) out[i] = leaks ? -1.0f : 2.0f * x[i] + 1.0f;
}
