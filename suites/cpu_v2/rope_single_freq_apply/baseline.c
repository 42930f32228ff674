/* rope_single_freq_apply: x (D, T) with T = B*H*N; freqs_cos, freqs_sin (D2, T), D2 = D/2.
 * out[d]      = x[d] * cos[d] - x[d + D2] * sin[d]
 * out[d + D2] = x[d] * sin[d] + x[d + D2] * cos[d]      for d < D2, along T.
 * Work items are COLS-wide column ranges of one row d. FUSE 1 computes the four products as
 * four passes over the output (as an array library would); FUSE 2 in one pass. */
/* Calling convention (AccelOpt CPU): void kernel(<inputs in definition order as const float*>,
 * <outputs as float*>). Tensors are dense, row-major (C order), 64-byte aligned, fp32. Axis
 * values arrive as #defines from the harness (-D flags); outputs are NaN on entry, inputs
 * must not be modified. Tunable constants are the #defines below: each `// tune:` line names
 * its legal values (suites/cpu_v2/README.md); every combination of legal values is correct. */
#include <math.h>
#include <stddef.h>
#include <stdlib.h>

// tune: FUSE in {1,2} -- 1 = four passes (one per product); 2 = one pass
#define FUSE 1
// tune: VEC in {1,2,4,8,16} -- floats per GNU C vector (1 = one-lane vectors, which gcc compiles poorly)
#define VEC 4
// tune: UNROLL in {1,2,4,8} -- vectors per iteration of the inner loop
#define UNROLL 1
// tune: COLS in {64,128,256,512,1024,2048,4096,8192} -- columns of T per parallel work item
#define COLS 1024
// tune: SCHED in {1,2,4} -- OpenMP schedule of the work items: 1 = static, 2 = dynamic, 4 = guided
#define SCHED 1
// tune: CHUNK in {1,2,4,8,16} -- work items per scheduling chunk
#define CHUNK 1

#if !(FUSE == 1 || FUSE == 2)
#error "FUSE: not a legal value (see its tune: line)"
#endif
#if !(VEC == 1 || VEC == 2 || VEC == 4 || VEC == 8 || VEC == 16)
#error "VEC: not a legal value (see its tune: line)"
#endif
#if !(UNROLL == 1 || UNROLL == 2 || UNROLL == 4 || UNROLL == 8)
#error "UNROLL: not a legal value (see its tune: line)"
#endif
#if !(COLS == 64 || COLS == 128 || COLS == 256 || COLS == 512 || COLS == 1024 || COLS == 2048 || COLS == 4096 || COLS == 8192)
#error "COLS: not a legal value (see its tune: line)"
#endif
#if !(SCHED == 1 || SCHED == 2 || SCHED == 4)
#error "SCHED: not a legal value (see its tune: line)"
#endif
#if !(CHUNK == 1 || CHUNK == 2 || CHUNK == 4 || CHUNK == 8 || CHUNK == 16)
#error "CHUNK: not a legal value (see its tune: line)"
#endif

#if SCHED == 1
#define OMP_SCHED static
#elif SCHED == 2
#define OMP_SCHED dynamic
#else
#define OMP_SCHED guided
#endif
#define PRAGMA(x) _Pragma(#x)
#define PRAGMA_UNROLL(n) PRAGMA(GCC unroll n)
#define MIN(a, b) ((a) < (b) ? (a) : (b))

#pragma GCC diagnostic ignored "-Wpsabi" /* vectors wider than the ISA's registers are fine */
typedef float vf __attribute__((vector_size(VEC * sizeof(float))));
typedef int vi __attribute__((vector_size(VEC * sizeof(int))));

static inline vf vload(const float* p) { vf v; __builtin_memcpy(&v, p, sizeof v); return v; }
static inline void vstore(float* p, vf v) { __builtin_memcpy(p, &v, sizeof v); }
static inline vf vsplat(float s) { return (vf){} + s; }
static inline vf vsel(vi mask, vf a, vf b) { return (vf)(((vi)a & mask) | ((vi)b & ~mask)); }

void kernel(const float* x, const float* freqs_cos, const float* freqs_sin, float* out) {
    const long cols = MIN(COLS, T), items = (T + cols - 1) / cols, step = (long)VEC * UNROLL;
    #pragma omp parallel for collapse(2) schedule(OMP_SCHED, CHUNK)
    for (int d = 0; d < D2; d++)
        for (long it = 0; it < items; it++) {
            const long t0 = it * cols, t1 = MIN(t0 + cols, T), tv = t0 + (t1 - t0) / step * step;
            const float* x0 = x + (size_t)d * T;
            const float* x1 = x + (size_t)(d + D2) * T;
            const float* c = freqs_cos + (size_t)d * T;
            const float* s = freqs_sin + (size_t)d * T;
            float* lo = out + (size_t)d * T;
            float* hi = out + (size_t)(d + D2) * T;
            if (FUSE == 1) {
                for (long t = t0; t < tv; t += step)
                    for (int u = 0; u < UNROLL; u++) vstore(lo + t + u * VEC, vload(x0 + t + u * VEC) * vload(c + t + u * VEC));
                for (long t = t0; t < tv; t += step)
                    for (int u = 0; u < UNROLL; u++) vstore(lo + t + u * VEC, vload(lo + t + u * VEC) - vload(x1 + t + u * VEC) * vload(s + t + u * VEC));
                for (long t = t0; t < tv; t += step)
                    for (int u = 0; u < UNROLL; u++) vstore(hi + t + u * VEC, vload(x0 + t + u * VEC) * vload(s + t + u * VEC));
                for (long t = t0; t < tv; t += step)
                    for (int u = 0; u < UNROLL; u++) vstore(hi + t + u * VEC, vload(hi + t + u * VEC) + vload(x1 + t + u * VEC) * vload(c + t + u * VEC));
            } else {
                for (long t = t0; t < tv; t += step)
                    for (int u = 0; u < UNROLL; u++) {
                        const long e = t + u * VEC;
                        const vf a = vload(x0 + e), b = vload(x1 + e), cv = vload(c + e), sv = vload(s + e);
                        vstore(lo + e, a * cv - b * sv);
                        vstore(hi + e, a * sv + b * cv);
                    }
            }
            for (long t = tv; t < t1; t++) {
                lo[t] = x0[t] * c[t] - x1[t] * s[t];
                hi[t] = x0[t] * s[t] + x1[t] * c[t];
            }
        }
}
