/* adamw: one AdamW step at t=1 (lr 1e-3, betas 0.9/0.999, eps 1e-8, weight decay 0.01),
 * elementwise over (M, N); returns the updated parameters in new_theta.
 * FUSE 1 runs the update stage by stage (decayed theta, first moment, second moment, step),
 * each a pass over memory through scratch arrays; FUSE 2 does all stages in one pass. */
/* Calling convention (AccelOpt CPU): void kernel(<inputs in definition order as const float*>,
 * <outputs as float*>). Tensors are dense, row-major (C order), 64-byte aligned, fp32. Axis
 * values arrive as #defines from the harness (-D flags); outputs are NaN on entry, inputs
 * must not be modified. Tunable constants are the #defines below: each `// tune:` line names
 * its legal values (suites/cpu_v2/README.md); every combination of legal values is correct. */
#include <math.h>
#include <stddef.h>
#include <stdlib.h>

// tune: FUSE in {1,2} -- 1 = one pass per stage through scratch arrays; 2 = all stages in one pass
#define FUSE 1
// tune: VEC in {1,2,4,8,16} -- floats per GNU C vector (1 = one-lane vectors, which gcc compiles poorly)
#define VEC 4
// tune: UNROLL in {1,2,4,8} -- vectors per iteration of the inner loop
#define UNROLL 1
// tune: SCHED in {1,2,4} -- OpenMP schedule: 1 = static, 2 = dynamic, 4 = guided
#define SCHED 1
// tune: CHUNK in {1,2,4,8,16,32,64,128,256,512,1024,2048,4096} -- iterations (VEC*UNROLL elements each) per scheduling chunk
#define CHUNK 1024

#if !(FUSE == 1 || FUSE == 2)
#error "FUSE: not a legal value (see its tune: line)"
#endif
#if !(VEC == 1 || VEC == 2 || VEC == 4 || VEC == 8 || VEC == 16)
#error "VEC: not a legal value (see its tune: line)"
#endif
#if !(UNROLL == 1 || UNROLL == 2 || UNROLL == 4 || UNROLL == 8)
#error "UNROLL: not a legal value (see its tune: line)"
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

#pragma GCC optimize("no-math-errno") /* lets sqrtf compile to a vector square root */

static inline vf vsqrt(vf x) {
    vf r;
    for (int l = 0; l < VEC; l++) r[l] = sqrtf(x[l]);
    return r;
}

/* one pass over [0, n) in VEC*UNROLL-element iterations; i is the first element of a vector */
#define PASS(...)                                                        \
    PRAGMA(omp for schedule(OMP_SCHED, CHUNK))                           \
    for (long blk = 0; blk < blocks; blk++)                              \
        for (int u = 0; u < UNROLL; u++) {                               \
            const long i = blk * step + u * VEC;                         \
            __VA_ARGS__;                                                 \
        }

void kernel(const float* theta, const float* g, const float* m, const float* v, float* new_theta) {
    const long n = (long)M * N, step = (long)VEC * UNROLL, blocks = n / step;
    float* mt = FUSE == 1 ? malloc(sizeof(float) * n) : NULL;
    float* vt = FUSE == 1 ? malloc(sizeof(float) * n) : NULL;
    #pragma omp parallel
    {
        if (FUSE == 1) {
            PASS(vstore(new_theta + i, vload(theta + i) - 1e-5f * vload(theta + i)))
            PASS(vstore(mt + i, 0.9f * vload(m + i) + 0.1f * vload(g + i)))
            PASS(vstore(vt + i, 0.999f * vload(v + i) + 0.001f * vload(g + i) * vload(g + i)))
            PASS(vstore(new_theta + i,
                        vload(new_theta + i) - 0.01f * vload(mt + i) / (vsqrt(vload(vt + i) * 1000.0f) + 1e-8f)))
        } else {
            PASS(const vf th = vload(theta + i), gi = vload(g + i);
                 const vf m_t = 0.9f * vload(m + i) + 0.1f * gi;
                 const vf v_t = 0.999f * vload(v + i) + 0.001f * gi * gi;
                 vstore(new_theta + i, (th - 1e-5f * th) - 0.01f * m_t / (vsqrt(v_t * 1000.0f) + 1e-8f)))
        }
    }
    for (long i = blocks * step; i < n; i++) {
        const float m_t = 0.9f * m[i] + 0.1f * g[i], v_t = 0.999f * v[i] + 0.001f * g[i] * g[i];
        new_theta[i] = (theta[i] - 1e-5f * theta[i]) - 0.01f * m_t / (sqrtf(v_t * 1000.0f) + 1e-8f);
    }
    free(mt);
    free(vt);
}
