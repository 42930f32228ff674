/* bmm_softmax: out[b] = softmax(lhs[b] (M, K) @ rhs[b] (K, N), axis=-1) for b < B.
 * Blocked GEMM: the output is cut into BLOCK_M x BLOCK_N cache blocks shared out to the OpenMP
 * threads; a block runs over the depth in BLOCK_K steps, as one dot product per element (LOOP_ORDER 1),
 * row by row (LOOP_ORDER 2) or in MR x NV*VEC register tiles (LOOP_ORDER 4). As shipped: the
 * textbook i-j-k loop (a dot product per output element, the right matrix read down its columns),
 * rows shared out 8 at a time, no blocking over N or K; the register-tile knobs ship at 1 x 16
 * (VEC 8, NV 2) and act once LOOP_ORDER is 4.
 * FUSE 1: all products, then a softmax pass over the rows. FUSE 2: each cache block that spans
 * whole rows (BLOCK_N >= N) applies the softmax in its epilogue; otherwise the pass follows. */
/* Calling convention (AccelOpt CPU): void kernel(<inputs in definition order as const float*>,
 * <outputs as float*>). Tensors are dense, row-major (C order), 64-byte aligned, fp32. Axis
 * values arrive as #defines from the harness (-D flags); outputs are NaN on entry, inputs
 * must not be modified. Tunable constants are the #defines below: each `// tune:` line names
 * its legal values (suites/cpu_v2/README.md); every combination of legal values is correct. */
#include <math.h>
#include <stddef.h>
#include <stdlib.h>

// tune: FUSE in {1,2} -- 1 = products, then a softmax pass; 2 = softmax in the block epilogue when blocks span whole rows
#define FUSE 1
// tune: EXP_IMPL in {1,2} -- 1 = libm expf per element, 2 = inline polynomial exp on whole VEC-wide vectors
#define EXP_IMPL 1
// tune: LOOP_ORDER in {1,2,4} -- 1 = i-j-k, the textbook loop: each output element is one dot product, the right matrix read down its columns; 2 = i-k-j: each row of a block accumulates in memory while rows of the right matrix stream by (compiler-vectorized); 4 = register tiles: MR x NV*VEC accumulators stay in registers over the k loop
#define LOOP_ORDER 1
// tune: VEC in {1,2,4,8,16} -- floats per GNU C vector in the register tiles (1 = one-lane vectors, which gcc compiles poorly)
#define VEC 8
// tune: MR in {1,2,4,8} -- rows per register tile (LOOP_ORDER 4)
#define MR 1
// tune: NV in {1,2,4} -- vectors per row of a register tile: tile width NV*VEC columns (LOOP_ORDER 4)
#define NV 2
// tune: UNROLL_K in {1,2,4,8} -- unroll factor of the k loop of a register tile (LOOP_ORDER 4)
#define UNROLL_K 1
// tune: BLOCK_M in {8,16,32,64,128,256,512} -- rows per cache block, the unit of parallel work with BLOCK_N (clamped to the rows)
#define BLOCK_M 8
// tune: BLOCK_N in {32,64,128,256,512,1024} -- columns per cache block (clamped to the columns)
#define BLOCK_N 1024
// tune: BLOCK_K in {16,32,64,128,256,512,1024} -- depth of one pass over a cache block (clamped to the depth)
#define BLOCK_K 1024
// tune: PACK_A in {1,2} -- 1 = read the left matrix in place, 2 = copy each block of it into MR-row panels (LOOP_ORDER 4)
#define PACK_A 1
// tune: PACK_B in {1,2} -- 1 = read the right matrix in place, 2 = copy each block of it into contiguous tile-wide panels (LOOP_ORDER 4)
#define PACK_B 1
// tune: SCHED in {1,2,4} -- OpenMP schedule of the cache blocks: 1 = static, 2 = dynamic, 4 = guided
#define SCHED 1
// tune: CHUNK in {1,2,4,8,16} -- cache blocks per scheduling chunk
#define CHUNK 1

#if !(FUSE == 1 || FUSE == 2)
#error "FUSE: not a legal value (see its tune: line)"
#endif
#if !(EXP_IMPL == 1 || EXP_IMPL == 2)
#error "EXP_IMPL: not a legal value (see its tune: line)"
#endif
#if !(LOOP_ORDER == 1 || LOOP_ORDER == 2 || LOOP_ORDER == 4)
#error "LOOP_ORDER: not a legal value (see its tune: line)"
#endif
#if !(VEC == 1 || VEC == 2 || VEC == 4 || VEC == 8 || VEC == 16)
#error "VEC: not a legal value (see its tune: line)"
#endif
#if !(MR == 1 || MR == 2 || MR == 4 || MR == 8)
#error "MR: not a legal value (see its tune: line)"
#endif
#if !(NV == 1 || NV == 2 || NV == 4)
#error "NV: not a legal value (see its tune: line)"
#endif
#if !(UNROLL_K == 1 || UNROLL_K == 2 || UNROLL_K == 4 || UNROLL_K == 8)
#error "UNROLL_K: not a legal value (see its tune: line)"
#endif
#if !(BLOCK_M == 8 || BLOCK_M == 16 || BLOCK_M == 32 || BLOCK_M == 64 || BLOCK_M == 128 || BLOCK_M == 256 || BLOCK_M == 512)
#error "BLOCK_M: not a legal value (see its tune: line)"
#endif
#if !(BLOCK_N == 32 || BLOCK_N == 64 || BLOCK_N == 128 || BLOCK_N == 256 || BLOCK_N == 512 || BLOCK_N == 1024)
#error "BLOCK_N: not a legal value (see its tune: line)"
#endif
#if !(BLOCK_K == 16 || BLOCK_K == 32 || BLOCK_K == 64 || BLOCK_K == 128 || BLOCK_K == 256 || BLOCK_K == 512 || BLOCK_K == 1024)
#error "BLOCK_K: not a legal value (see its tune: line)"
#endif
#if !(PACK_A == 1 || PACK_A == 2)
#error "PACK_A: not a legal value (see its tune: line)"
#endif
#if !(PACK_B == 1 || PACK_B == 2)
#error "PACK_B: not a legal value (see its tune: line)"
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

/* o[0..n) = softmax(o * scale) in place */
static void softmax_row(float* o, int n, float scale) {
    float mx = -INFINITY;
    for (int j = 0; j < n; j++) mx = o[j] > mx ? o[j] : mx;
    mx *= scale;
    vf vs = (vf){};
    int j = 0;
    for (; j + VEC <= n; j += VEC) {
        const vf e = vexp(vload(o + j) * scale - mx);
        vstore(o + j, e);
        vs += e;
    }
    float sum = 0.0f;
    for (int l = 0; l < VEC; l++) sum += vs[l];
    for (; j < n; j++) { o[j] = sexp(o[j] * scale - mx); sum += o[j]; }
    const float inv = 1.0f / sum;
    for (j = 0; j < n; j++) o[j] *= inv;
}

#define NR (NV * VEC)

/* c[r][j] (+)= sum_k a[r*ars + k*aks] * b[k*bks + j] for one full MR x NR register tile. */
static inline void tile_full(int kc, const float* a, size_t ars, size_t aks, const float* b, size_t bks,
                             float* c, size_t ldc, int first) {
    vf acc[MR][NV];
    PRAGMA_UNROLL(8) for (int r = 0; r < MR; r++)
        PRAGMA_UNROLL(4) for (int v = 0; v < NV; v++) acc[r][v] = first ? (vf){} : vload(c + r * ldc + v * VEC);
    PRAGMA_UNROLL(UNROLL_K) for (int k = 0; k < kc; k++) {
        vf bv[NV];
        PRAGMA_UNROLL(4) for (int v = 0; v < NV; v++) bv[v] = vload(b + k * bks + v * VEC);
        PRAGMA_UNROLL(8) for (int r = 0; r < MR; r++) {
            const float ar = a[r * ars + k * aks];
            PRAGMA_UNROLL(4) for (int v = 0; v < NV; v++) acc[r][v] += ar * bv[v];
        }
    }
    PRAGMA_UNROLL(8) for (int r = 0; r < MR; r++)
        PRAGMA_UNROLL(4) for (int v = 0; v < NV; v++) vstore(c + r * ldc + v * VEC, acc[r][v]);
}

/* The same for a partial mr x nr tile at the edge of a block. */
static void tile_edge(int mr, int nr, int kc, const float* a, size_t ars, size_t aks, const float* b, size_t bks,
                      float* c, size_t ldc, int first) {
    for (int r = 0; r < mr; r++)
        for (int j = 0; j < nr; j++) {
            float s = first ? 0.0f : c[r * ldc + j];
            for (int k = 0; k < kc; k++) s += a[r * ars + k * aks] * b[k * bks + j];
            c[r * ldc + j] = s;
        }
}

/* Block [i0, i1) x [j0, j1) of c (+)= A @ B over the whole depth kd, where A(i, k) = a[i*ars + k*aks]
 * and B(k, j) = b[k*ldb + j]. apack/bpack: this thread's panel buffers (PACK_A/PACK_B == 2). */
static void gemm_block(int i0, int i1, int j0, int j1, int kd, const float* a, size_t ars, size_t aks,
                       const float* b, size_t ldb, float* c, size_t ldc, int accumulate, float* apack, float* bpack) {
    const int bk = MIN(BLOCK_K, kd);
    for (int k0 = 0; k0 < kd; k0 += bk) {
        const int kc = MIN(bk, kd - k0), first = k0 == 0 && !accumulate;
        const float* ak = a + (size_t)k0 * aks;
        const float* bsrc = b + (size_t)k0 * ldb;
        if (LOOP_ORDER == 1) {  /* i-j-k: one dot product per element of the block */
            tile_edge(i1 - i0, j1 - j0, kc, ak + (size_t)i0 * ars, ars, aks, bsrc + j0, ldb,
                      c + (size_t)i0 * ldc + j0, ldc, first);
            continue;
        }
        if (LOOP_ORDER == 2) {
            for (int i = i0; i < i1; i++) {
                float* crow = c + (size_t)i * ldc;
                if (first)
                    for (int j = j0; j < j1; j++) crow[j] = 0.0f;
                for (int k = 0; k < kc; k++) {
                    const float aik = ak[(size_t)i * ars + (size_t)k * aks];
                    const float* brow = bsrc + (size_t)k * ldb;
                    for (int j = j0; j < j1; j++) crow[j] += aik * brow[j];
                }
            }
            continue;
        }
        if (PACK_B == 2)  /* the panel at column j holds columns j .. j+NR of all kc rows */
            for (int j = j0; j < j1; j += NR) {
                const int w = MIN(NR, j1 - j);
                float* dst = bpack + (size_t)(j - j0) * kc;
                for (int k = 0; k < kc; k++)
                    for (int jj = 0; jj < w; jj++) dst[k * w + jj] = bsrc[(size_t)k * ldb + j + jj];
            }
        if (PACK_A == 2)  /* the panel at row i holds rows i .. i+MR, k-major */
            for (int i = i0; i < i1; i += MR) {
                const int h = MIN(MR, i1 - i);
                float* dst = apack + (size_t)(i - i0) * kc;
                for (int k = 0; k < kc; k++)
                    for (int r = 0; r < h; r++) dst[k * h + r] = ak[(size_t)(i + r) * ars + (size_t)k * aks];
            }
        for (int i = i0; i < i1; i += MR) {
            const int h = MIN(MR, i1 - i);
            const float* ap = PACK_A == 2 ? apack + (size_t)(i - i0) * kc : ak + (size_t)i * ars;
            const size_t prs = PACK_A == 2 ? 1 : ars, pks = PACK_A == 2 ? (size_t)h : aks;
            for (int j = j0; j < j1; j += NR) {
                const int w = MIN(NR, j1 - j);
                const float* bp = PACK_B == 2 ? bpack + (size_t)(j - j0) * kc : bsrc + j;
                const size_t bks = PACK_B == 2 ? (size_t)w : ldb;
                float* cp = c + (size_t)i * ldc + j;
                if (h == MR && w == NR) tile_full(kc, ap, prs, pks, bp, bks, cp, ldc, first);
                else tile_edge(h, w, kc, ap, prs, pks, bp, bks, cp, ldc, first);
            }
        }
    }
}

/* Called on each finished cache block (rows [i0, i1), columns [j0, j1)) while it is in cache. */
typedef void (*epilogue_fn)(const void* ctx, int i0, int i1, int j0, int j1);

typedef struct { float* apack; float* bpack; } gemm_buffers;

static gemm_buffers gemm_buffers_new(void) {
    gemm_buffers g = {NULL, NULL};
    if (LOOP_ORDER == 4 && PACK_A == 2) g.apack = aligned_alloc(64, sizeof(float) * BLOCK_M * BLOCK_K);
    if (LOOP_ORDER == 4 && PACK_B == 2) g.bpack = aligned_alloc(64, sizeof(float) * BLOCK_K * BLOCK_N);
    return g;
}

static void gemm_buffers_free(gemm_buffers g) { free(g.apack); free(g.bpack); }

/* c (m x n, row stride ldc) (+)= A (m x kd) @ B (kd x n). A worksharing loop over the cache
 * blocks: every thread of the enclosing parallel region must call it (ends in a barrier). */
static void gemm(int m, int n, int kd, const float* a, size_t ars, size_t aks, const float* b, size_t ldb,
                 float* c, size_t ldc, int accumulate, gemm_buffers buf, epilogue_fn epi, const void* ctx) {
    const int bm = MIN(BLOCK_M, m), bn = MIN(BLOCK_N, n);
    const int tiles_m = (m + bm - 1) / bm, tiles_n = (n + bn - 1) / bn;
    #pragma omp for collapse(2) schedule(OMP_SCHED, CHUNK)
    for (int tm = 0; tm < tiles_m; tm++)
        for (int tn = 0; tn < tiles_n; tn++) {
            const int i0 = tm * bm, i1 = MIN(i0 + bm, m), j0 = tn * bn, j1 = MIN(j0 + bn, n);
            gemm_block(i0, i1, j0, j1, kd, a, ars, aks, b, ldb, c, ldc, accumulate, buf.apack, buf.bpack);
            if (epi) epi(ctx, i0, i1, j0, j1);
        }
}

typedef struct { float* out; } sm_ctx;

static void softmax_block(const void* p, int i0, int i1, int j0, int j1) {
    const sm_ctx* s = p;
    if (j0 == 0 && j1 == N)
        for (int i = i0; i < i1; i++) softmax_row(s->out + (size_t)i * N, N, 1.0f);
}

void kernel(const float* lhs, const float* rhs, float* out) {
    #pragma omp parallel
    {
        gemm_buffers buf = gemm_buffers_new();
        for (int b = 0; b < B; b++) {
            sm_ctx ctx = {out + (size_t)b * M * N};
            gemm(M, N, K, lhs + (size_t)b * M * K, K, 1, rhs + (size_t)b * K * N, N, out + (size_t)b * M * N, N, 0,
                 buf, FUSE == 2 ? softmax_block : NULL, &ctx);
        }
        gemm_buffers_free(buf);
        if (FUSE == 1 || BLOCK_N < N) {
            #pragma omp for schedule(static)
            for (int r = 0; r < B * M; r++) softmax_row(out + (size_t)r * N, N, 1.0f);
        }
    }
}
