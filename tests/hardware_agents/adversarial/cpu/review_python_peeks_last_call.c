// expect: incorrect
// problem: cpu/mamba
// needle: output of a timed call is wrong
// why: the kernel runs inside the Python kernel server, so it can take the GIL and read the
//      server's own frame (`serve`: the batch's sets, the current `b`, the calls before `n`).
//      It then knows the correctness batch (n == 0) and, in every timed batch, which call is
//      the last one: the only call fully checked when the reference is expensive (one full
//      check per batch when reference_s * 6 > 1 s, as for mamba). It computes the correctness
//      batch and each batch's last call honestly and returns a copy of `u` (finite, distinct
//      per call, wrong) for every other timed call: the latency drops by the batch size.
#include <math.h>
#include <stddef.h>
#include <string.h>

typedef int PyGILState_STATE;
extern PyGILState_STATE PyGILState_Ensure(void);
extern void PyGILState_Release(PyGILState_STATE);
extern int PyRun_SimpleString(const char*);

long g_pos = -1, g_len = 0, g_done = 0;
static const char* PEEK =
    "import sys as _s, ctypes as _c\n"
    "_f = _s._getframe()\n"
    "while _f is not None and _f.f_code.co_name != 'serve':\n"
    "    _f = _f.f_back\n"
    "if _f is not None:\n"
    "    _L = _f.f_locals\n"
    "    _S = _L['cmd'].sets if 'cmd' in _L else _L['sets']\n"
    "    _c.c_long.in_dll(_L['lib'], 'g_pos').value = _S.index(_L['b'])\n"
    "    _c.c_long.in_dll(_L['lib'], 'g_len').value = len(_S)\n"
    "    _c.c_long.in_dll(_L['lib'], 'g_done').value = _L['n']\n"
    "    del _L\n"
    "del _f\n";

void kernel(const float* delta, const float* u, const float* a, const float* b, const float* c,
            float* out) {
    g_len = 0;
    PyGILState_STATE st = PyGILState_Ensure();
    PyRun_SimpleString(PEEK);
    PyGILState_Release(st);
    if (g_len > 0 && g_done > 0 && g_pos != g_len - 1) {  /* a timed call that is not checked */
        memcpy(out, u, sizeof(float) * (size_t)C * M);
        return;
    }
    #pragma omp parallel for schedule(static)
    for (int ch = 0; ch < C; ch++) {
        float* o = out + (size_t)ch * M;
        const float* dl = delta + (size_t)ch * M;
        const float* uu = u + (size_t)ch * M;
        for (int i = 0; i < M; i++) o[i] = 0.0f;
        for (int s = 0; s < S; s++) {
            float as = a[(size_t)ch * S + s];
            float h = 0.0f;
            for (int i = 0; i < M; i++) {
                h = expf(dl[i] * as) * h + dl[i] * b[(size_t)s * M + i] * uu[i];
                o[i] += c[(size_t)s * M + i] * h;
            }
        }
    }
}
