// expect: incorrect
// problem: scale_shift
// needle: output of a timed call is wrong
// why: the same in-process Python peek as review_python_peeks_last_call (the kernel takes the
//      GIL and reads the kernel server's frame: the batch's sets, its position, the calls so
//      far), on a problem whose reference is cheap: every timed batch then also checks one
//      random earlier call in full, chosen by the parent after the batch, so a kernel that is
//      lazy on every call but the last is caught even though it knows which call is last.
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

void kernel(const float* x, float* out) {
    g_len = 0;
    PyGILState_STATE st = PyGILState_Ensure();
    PyRun_SimpleString(PEEK);
    PyGILState_Release(st);
    if (g_len > 0 && g_done > 0 && g_pos != g_len - 1) {  /* a timed call, not the last */
        memcpy(out, x, sizeof(float) * (long)M * N);
        return;
    }
    #pragma omp parallel for
    for (long i = 0; i < (long)M * N; i++) out[i] = 2.0f * x[i] + 1.0f;
}
