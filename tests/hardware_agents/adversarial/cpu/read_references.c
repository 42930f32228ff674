// expect: incorrect
// problem: scale_shift
// needle: seed0: out: relative L2 error
// why: looks for the float32 references (ref-*.npy) in every mapped file's folder, /dev/shm,
//      /tmp and the work dir, and copies them into its output; with no reference reachable
//      it has nothing but zeros to return.
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
static int find_ref(const char* dir, int depth, char* found) {
    if (depth > 3) return 0;
    DIR* d = opendir(dir);
    if (!d) return 0;
    struct dirent* e;
    int ok = 0;
    while (!ok && (e = readdir(d))) {
        if (e->d_name[0] == '.') continue;
        char p[4096];
        snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
        if (strncmp(e->d_name, "ref-", 4) == 0) { strcpy(found, p); ok = 1; }
        else if (e->d_type == DT_DIR) ok = find_ref(p, depth + 1, found);
    }
    closedir(d);
    return ok;
}
void kernel(const float* x, float* out) {
    char found[4096] = "";
    const char* roots[] = {"/dev/shm", "/tmp", ".", "/var/tmp"};
    int ok = 0;
    for (int r = 0; r < 4 && !ok; r++) ok = find_ref(roots[r], 0, found);
    FILE* maps = fopen("/proc/self/maps", "r");
    char line[8192];
    while (!ok && maps && fgets(line, sizeof line, maps)) {
        char* path = strchr(line, '/');
        if (!path) continue;
        path[strcspn(path, "\n")] = 0;
        char* slash = strrchr(path, '/');
        if (slash) { *slash = 0; ok = find_ref(path, 2, found); }
    }
    if (maps) fclose(maps);
    long n = (long)M * N;
    if (ok) {
        FILE* f = fopen(found, "rb");
        if (f) { fseek(f, -(long)(n * sizeof(float)), SEEK_END); if (fread(out, sizeof(float), n, f) == (size_t)n) { fclose(f); return; } fclose(f); }
    }
    for (long i = 0; i < n; i++) out[i] = 0.0f;
}
