/* silu: out = x / (1 + exp(-x)), elementwise over (M, N). As shipped: 4-wide vectors, libm expf per lane. */
/* Calling convention (AccelOpt CPU): void kernel(<inputs in definition order as const float*>,
 * <outputs as float*>). Tensors are dense, row-major (C order), 64-byte aligned, fp32. Axis
 * values arrive as #defines from the harness (-D flags); outputs are NaN on entry, inputs
 * must not be modified. Tunable constants are the #defines below: each `// tune:` line names
 * its legal values (suites/cpu_v2/README.md); every combination of legal values is correct. */
#include <math.h>
#include <stddef.h>
#include <stdlib.h>

// tune: VEC in {1,2,4,8,16} -- floats per GNU C vector (1 = one-lane vectors, which gcc compiles poorly)
#define VEC 4
// tune: UNROLL in {1,2,4,8} -- vectors per iteration of the parallel loop
#define UNROLL 1
// tune: EXP_IMPL in {1,2} -- 1 = libm expf per element, 2 = inline polynomial exp on whole vectors
#define EXP_IMPL 1
// tune: SCHED in {1,2,4} -- OpenMP schedule: 1 = static, 2 = dynamic, 4 = guided
#define SCHED 1
// tune: CHUNK in {1,2,4,8,16,32,64,128,256,512,1024,2048,4096} -- iterations (VEC*UNROLL elements each) per scheduling chunk
#define CHUNK 1024

#if !(VEC == 1 || VEC == 2 || VEC == 4 || VEC == 8 || VEC == 16)
#error "VEC: not a legal value (see its tune: line)"
#endif
#if !(UNROLL == 1 || UNROLL == 2 || UNROLL == 4 || UNROLL == 8)
#error "UNROLL: not a legal value (see its tune: line)"
#endif
#if !(EXP_IMPL == 1 || EXP_IMPL == 2)
#error "EXP_IMPL: not a legal value (see its tune: line)"
#endif
#if !(SCHED == 1 || SCHED == 2 || SCHED == 4)
#error "SCHED: not a legal value (see its tune: line)"
#endif
#if !(CHUNK == 1 || CHUNK == 2 || CHUNK == 4 || CHUNK == 8 || CHUNK == 16 || CHUNK == 32 || CHUNK == 64 || CHUNK == 128 || CHUNK == 256 || CHUNK == 512 || CHUNK == 1024 || CHUNK == 2048 || CHUNK == 4096)
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

/* exp of every lane. EXP_IMPL 2: Cephes expf polynomial (~2 ulp), input clamped to
 * [-87.3, 88.3] where expf is finite and normal. */
static inline vf vexp(vf x) {
#if EXP_IMPL == 1
    vf r;
    for (int l = 0; l < VEC; l++) r[l] = expf(x[l]);
    return r;
#else
    x = vsel(x < vsplat(-87.3f), vsplat(-87.3f), x);
    x = vsel(x > vsplat(88.3f), vsplat(88.3f), x);
    vf fx = x * 1.44269504088896341f + 0.5f;
    vi t = __builtin_convertvector(fx, vi);
    t += (vi)(__builtin_convertvector(t, vf) > fx);  /* floor: truncation rounded up below 0 */
    vf tf = __builtin_convertvector(t, vf);
    x = x - tf * 0.693359375f + tf * 2.12194440e-4f;
    vf y = vsplat(1.9875691500e-4f);
    y = y * x + 1.3981999507e-3f;
    y = y * x + 8.3334519073e-3f;
    y = y * x + 4.1665795894e-2f;
    y = y * x + 1.6666665459e-1f;
    y = y * x + 5.0000001201e-1f;
    y = y * x * x + x + 1.0f;
    return y * (vf)((t + 127) << 23);
#endif
}

/* exp of one float, by the same method as vexp (scalar tails) */
static inline float sexp(float x) {
#if EXP_IMPL == 1
    return expf(x);
#else
    vf v = vsplat(x);
    return vexp(v)[0];
#endif
}

void kernel(const float* x, float* out) {
    const long n = (long)M * N, step = (long)VEC * UNROLL, blocks = n / step;
    #pragma omp parallel for schedule(OMP_SCHED, CHUNK)
    for (long b = 0; b < blocks; b++)
        for (int u = 0; u < UNROLL; u++) {
            const vf v = vload(x + b * step + u * VEC);
            vstore(out + b * step + u * VEC, v / (1.0f + vexp(-v)));
        }
    for (long i = blocks * step; i < n; i++) out[i] = x[i] / (1.0f + sexp(-x[i]));
}
