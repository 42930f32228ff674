"""Baseline NKI kernels of the 14 NKIBench operators, written for these tests in the styles of
NKIBench's own baselines (no file of NKIBench is copied): the compiler-emitted style (tensors
with block dimensions before `nl.par_dim`, `nisa` instructions, fp32 transposes through the
Tensor Engine against an identity from `nl.shared_constant`, PSUM accumulation, `nl.loop_reduce`,
masks for ragged tiles) and the hand-written style (`nl.*` tile code, Python and `nl.affine_range`
loops, `nl.matmul`). They read their shapes from their arguments, so the same kernel runs at
NKIBench's shapes (the benchmark) and at small ones (the tests).

`TO_NKI[name]` is the body of the problem's `transform_to_nki_inputs` (NKIBench lays some
inputs out in 128-row blocks for the kernel), written with the reference module's shape
constants."""

from __future__ import annotations

HEADER = """\
import numpy as np
import neuronxcc.nki as nki
import neuronxcc.nki.language as nl
import neuronxcc.nki.isa as nisa
from neuronxcc.nki.language import par_dim

"""
P = "nl.arange(128)[:, None]"

SILU = HEADER + """\
@nki.jit
def kernel(v1):
    # v1: (128, M // 128, N): row 128 * r + p of x sits at v1[p, r]
    _, R, N = v1.shape
    F = 1024 if N % 1024 == 0 else N
    H = 512 if F % 512 == 0 else F
    v2 = nl.ndarray((128, R, N), dtype=np.float32, buffer=nl.shared_hbm)
    bias = nl.ndarray((par_dim(128), 1), dtype=np.float32, buffer=nl.sbuf)
    xin = nl.ndarray((R, N // F, par_dim(128), F), dtype=np.float32, buffer=nl.sbuf)
    res = nl.ndarray((R, N // F, par_dim(128), F), dtype=np.float32, buffer=nl.sbuf)
    e = nl.ndarray((R, N // F, F // H, par_dim(128), H), dtype=np.float32, buffer=nl.sbuf)
    d = nl.ndarray((R, N // F, F // H, par_dim(128), H), dtype=np.float32, buffer=nl.sbuf)
    r = nl.ndarray((R, N // F, F // H, par_dim(128), H), dtype=np.float32, buffer=nl.sbuf)
    bias[nl.arange(128)[:, None], 0] = nisa.memset(shape=(128, 1), value=0, dtype=np.float32)
    for i0 in nl.affine_range(R):
        for i1 in nl.affine_range(N // F):
            xin[i0, i1, nl.arange(128)[:, None], nl.arange(F)[None, :]] = nl.load(
                v1[nl.arange(128)[:, None], i0, F * i1 + nl.arange(F)[None, :]])
            for i2 in nl.affine_range(F // H):
                cols = H * i2 + nl.arange(H)[None, :]
                e[i0, i1, i2, nl.arange(128)[:, None], nl.arange(H)[None, :]] = nisa.activation(
                    op=nl.exp, data=xin[i0, i1, nl.arange(128)[:, None], cols], bias=bias[nl.arange(128)[:, None], 0],
                    scale=-1.0)
                d[i0, i1, i2, nl.arange(128)[:, None], nl.arange(H)[None, :]] = nisa.tensor_scalar(
                    data=e[i0, i1, i2, nl.arange(128)[:, None], nl.arange(H)[None, :]], op0=nl.add, operand0=1.0,
                    reverse0=True)
                r[i0, i1, i2, nl.arange(128)[:, None], nl.arange(H)[None, :]] = nisa.reciprocal(
                    data=d[i0, i1, i2, nl.arange(128)[:, None], nl.arange(H)[None, :]])
                res[i0, i1, nl.arange(128)[:, None], cols] = nl.multiply(
                    xin[i0, i1, nl.arange(128)[:, None], cols], r[i0, i1, i2, nl.arange(128)[:, None], nl.arange(H)[None, :]])
            nl.store(v2[nl.arange(128)[:, None], i0, F * i1 + nl.arange(F)[None, :]],
                     value=res[i0, i1, nl.arange(128)[:, None], nl.arange(F)[None, :]])
    return v2
"""

ADAMW = HEADER + """\
@nki.jit
def kernel(theta, g, m, v):
    # one AdamW step; rows beyond M in the last 128-row tile are masked
    M, N = theta.shape
    F = 1024 if N % 1024 == 0 else N
    T = (M + 127) // 128
    out = nl.ndarray((M, N), dtype=np.float32, buffer=nl.shared_hbm)
    zero = nl.ndarray((par_dim(128), 1), dtype=np.float32, buffer=nl.sbuf)
    zero[nl.arange(128)[:, None], 0] = nisa.memset(shape=(128, 1), value=0, dtype=np.float32)
    for i0 in nl.affine_range(T):
        for i1 in nl.affine_range(N // F):
            rows = 128 * i0 + nl.arange(128)[:, None]
            cols = F * i1 + nl.arange(F)[None, :]
            inside = -128 * i0 - nl.arange(128)[:, None] + (M - 1) >= 0
            t = nl.load(theta[rows, cols], mask=inside)
            gg = nl.load(g[rows, cols], mask=inside)
            mm = nl.load(m[rows, cols], mask=inside)
            vv = nl.load(v[rows, cols], mask=inside)
            t1 = nl.subtract(t, nisa.tensor_scalar(data=t, op0=nl.multiply, operand0=1e-05, mask=inside), mask=inside)
            m1 = nl.add(nisa.tensor_scalar(data=mm, op0=nl.multiply, operand0=0.9, mask=inside),
                        nisa.tensor_scalar(data=gg, op0=nl.multiply, operand0=0.1, mask=inside), mask=inside)
            v1 = nl.add(nisa.tensor_scalar(data=vv, op0=nl.multiply, operand0=0.999, mask=inside),
                        nl.multiply(nisa.tensor_scalar(data=gg, op0=nl.multiply, operand0=0.001, mask=inside), gg,
                                    mask=inside), mask=inside)
            den = nisa.activation(op=nl.sqrt, data=v1, bias=zero[nl.arange(128)[:, None], 0], scale=1000.0, mask=inside)
            inv = nisa.reciprocal(data=nisa.tensor_scalar(data=den, op0=nl.add, operand0=1e-08, mask=inside),
                                  mask=inside)
            upd = nl.multiply(nisa.tensor_scalar(data=m1, op0=nl.multiply, operand0=0.01, mask=inside), inv,
                              mask=inside)
            nl.store(out[rows, cols], value=nl.subtract(t1, upd, mask=inside), mask=inside)
    return out
"""

ROPE = HEADER + """\
@nki.jit
def kernel(x_in, cos, sin):
    d_head, S = x_in.shape
    half = d_head // 2
    x_out = nl.ndarray((d_head, S), dtype=x_in.dtype, buffer=nl.shared_hbm)
    up = nl.arange(half)[:, None]
    TS = 512 if S % 512 == 0 else S
    i_d = nl.arange(d_head)[:, None]
    i_s = nl.arange(TS)[None, :]
    for off in range(0, S, TS):
        x_sb = nl.ndarray((d_head, TS), dtype=x_in.dtype, buffer=nl.sbuf)
        x_sb[i_d, i_s] = nl.load(x_in[i_d, i_s + off])
        c = nl.load(cos[up, i_s + off])
        s = nl.load(sin[up, i_s + off])
        even = x_sb[up, i_s]
        odd = nl.copy(x_sb[up + half, i_s])
        out_sb = nl.ndarray((d_head, TS), dtype=x_in.dtype, buffer=nl.sbuf)
        out_sb[up, i_s] = nisa.tensor_tensor(nisa.tensor_tensor(even, c, nl.multiply),
                                             nisa.tensor_tensor(odd, s, nl.multiply), nl.subtract)
        out_sb[up + half, i_s] = nisa.tensor_tensor(nisa.tensor_tensor(odd, c, nl.multiply),
                                                    nisa.tensor_tensor(even, s, nl.multiply), nl.add)
        nl.store(x_out[i_d, i_s + off], out_sb)
    return x_out
"""

MAMBA = HEADER + """\
@nki.jit
def kernel(delta, u, a, b, c):
    C, L = delta.shape
    _, S = a.shape
    out = nl.ndarray((C, L), dtype=delta.dtype, buffer=nl.shared_hbm)
    acc = nl.zeros((C // 128, par_dim(128), L), dtype=delta.dtype)
    for s in nl.affine_range(S):
        for t in nl.affine_range(C // 128):
            ch = t * 128
            d_i = nl.load(delta[ch:ch + 128, 0:L])
            a_i = nl.load(a[ch:ch + 128, s])
            dA = nisa.activation(op=nl.exp, data=d_i, scale=a_i)
            u_i = nl.load(u[ch:ch + 128, 0:L])
            b_i = nl.load(b[s:s + 1, 0:L]).broadcast_to((128, L))
            dBu = nisa.tensor_tensor(nisa.tensor_tensor(d_i, u_i, op=nl.multiply), b_i, op=nl.multiply)
            scan = nisa.tensor_tensor_scan(dA, dBu, initial=0, op0=np.multiply, op1=np.add)
            c_i = nl.load(c[s:s + 1, 0:L]).broadcast_to((128, L))
            acc[t, 0:128, 0:L] += nisa.tensor_tensor(scan, c_i, op=nl.multiply)
    for t in nl.affine_range(C // 128):
        nl.store(out[t * 128:t * 128 + 128, 0:L], acc[t, 0:128, 0:L])
    return out
"""

# matmul in the compiler's style: lhs arrives as (M/128, 128, K/128, 128); each 128x128 block is
# transposed on the Tensor Engine against an identity, then multiplied into PSUM over K
MATMUL = HEADER + """\
@nki.jit
def kernel(v1, v2):
    MT, _, KT, _ = v1.shape
    N = v2.shape[2]
    NT = N // 512
    out = nl.ndarray((MT, 128, N), dtype=np.float32, buffer=nl.shared_hbm)
    ident = nl.shared_constant(np.identity(128, dtype=np.float32))
    eye = nl.ndarray((par_dim(128), 128), dtype=np.float32, buffer=nl.sbuf)
    rhs = nl.ndarray((KT, par_dim(128), N), dtype=np.float32, buffer=nl.sbuf)
    lhs = nl.ndarray((MT, par_dim(128), KT, 128), dtype=np.float32, buffer=nl.sbuf)
    tp = nl.zeros((MT, KT, par_dim(128), 128), dtype=np.float32, buffer=nl.psum, lazy_initialization=True)
    lhsT = nl.ndarray((MT, par_dim(128), KT, 128), dtype=np.float32, buffer=nl.sbuf)
    acc = nl.zeros((MT, NT, par_dim(128), 512), dtype=np.float32, buffer=nl.psum, lazy_initialization=True)
    res = nl.ndarray((MT, par_dim(128), N), dtype=np.float32, buffer=nl.sbuf)
    eye[nl.arange(128)[:, None], nl.arange(128)[None, :]] = nl.load(ident[nl.arange(128)[:, None], nl.arange(128)[None, :]])
    for k in nl.affine_range(KT):
        rhs[k, nl.arange(128)[:, None], nl.arange(N)[None, :]] = nl.load(v2[k, nl.arange(128)[:, None], nl.arange(N)[None, :]])
    for i in nl.affine_range(MT):
        lhs[i, nl.arange(128)[:, None, None], nl.arange(KT)[None, :, None], nl.arange(128)[None, None, :]] = nl.load(
            v1[i, nl.arange(128)[:, None, None], nl.arange(KT)[None, :, None], nl.arange(128)[None, None, :]])
        for k in nl.affine_range(KT):
            tp[i, k, nl.arange(128)[:, None], nl.arange(128)[None, :]] = nisa.nc_matmul(
                lhs[i, nl.arange(128)[:, None], k, nl.arange(128)[None, :]], eye[nl.arange(128)[:, None], nl.arange(128)[None, :]],
                is_moving_onezero=True, is_transpose=True)
            lhsT[i, nl.arange(128)[:, None], k, nl.arange(128)[None, :]] = nl.copy(
                tp[i, k, nl.arange(128)[:, None], nl.arange(128)[None, :]])
        for n in nl.affine_range(NT):
            for k in nl.affine_range(KT):
                acc[i, n, nl.arange(128)[:, None], nl.arange(512)[None, :]] += nisa.nc_matmul(
                    lhsT[i, nl.arange(128)[:, None], k, nl.arange(128)[None, :]],
                    rhs[k, nl.arange(128)[:, None], 512 * n + nl.arange(512)[None, :]])
            res[i, nl.arange(128)[:, None], 512 * n + nl.arange(512)[None, :]] = nl.copy(
                acc[i, n, nl.arange(128)[:, None], nl.arange(512)[None, :]])
        nl.store(out[i, nl.arange(128)[:, None], nl.arange(N)[None, :]], value=res[i, nl.arange(128)[:, None], nl.arange(N)[None, :]])
    return out
"""

# transpose_matmul: lhs_t (K, M) and rhs (K, N) arrive as (128, K/128, .) (row 128*k... is p*KT + k);
# N need not be a multiple of 512: the last column tile is masked
TRANSPOSE_MATMUL = HEADER + """\
@nki.jit
def kernel(v1, v2):
    _, KT, M = v1.shape
    N = v2.shape[2]
    NT = (N + 511) // 512
    out = nl.ndarray((M // 128, 128, N), dtype=np.float32, buffer=nl.shared_hbm)
    for i in nl.affine_range(M // 128):
        for n in nl.affine_range(NT):
            acc = nl.zeros((128, 512), dtype=np.float32, buffer=nl.psum)
            inside = -512 * n - nl.arange(512)[None, :] + (N - 1) >= 0
            for k in nl.affine_range(KT):
                a = nl.load(v1[nl.arange(128)[:, None], k, 128 * i + nl.arange(128)[None, :]])
                b = nl.load(v2[nl.arange(128)[:, None], k, 512 * n + nl.arange(512)[None, :]], mask=inside)
                acc[nl.arange(128)[:, None], nl.arange(512)[None, :]] += nisa.nc_matmul(
                    a, b[nl.arange(128)[:, None], nl.arange(512)[None, :]], mask=inside)
            res = nl.copy(acc, mask=inside)
            nl.store(out[i, nl.arange(128)[:, None], 512 * n + nl.arange(512)[None, :]],
                     value=res[nl.arange(128)[:, None], nl.arange(512)[None, :]], mask=inside)
    return out
"""

_BMM_HEAD = """\
@nki.jit
def kernel(v1, v2):
    B, M, K = v1.shape
    N = v2.shape[2]
    MT, NT = M // 128, N // 512
    out = nl.ndarray((B, MT, 128, N), dtype=np.float32, buffer=nl.shared_hbm)
    ident = nl.shared_constant(np.identity(128, dtype=np.float32))
    eye = nl.ndarray((par_dim(128), 128), dtype=np.float32, buffer=nl.sbuf)
    eye[nl.arange(128)[:, None], nl.arange(128)[None, :]] = nl.load(ident[nl.arange(128)[:, None], nl.arange(128)[None, :]])
    for b in nl.affine_range(B):
        rhs = nl.load(v2[b, nl.arange(K)[:, None], nl.arange(N)[None, :]])
        for i in nl.affine_range(MT):
            a = nl.load(v1[b, 128 * i + nl.arange(128)[:, None], nl.arange(K)[None, :]])
            aT_ps = nisa.nc_matmul(a, eye[nl.arange(128)[:, None], nl.arange(128)[None, :]], is_moving_onezero=True,
                                   is_transpose=True)
            aT = nl.copy(aT_ps)
"""

BMM = HEADER + _BMM_HEAD + """\
            row = nl.ndarray((par_dim(128), N), dtype=np.float32, buffer=nl.sbuf)
            for n in nl.affine_range(NT):
                ps = nisa.nc_matmul(aT, rhs[nl.arange(K)[:, None], 512 * n + nl.arange(512)[None, :]])
                row[nl.arange(128)[:, None], 512 * n + nl.arange(512)[None, :]] = nl.copy(ps)
            nl.store(out[b, i, nl.arange(128)[:, None], nl.arange(N)[None, :]], value=row)
    return out
"""

BMM_SOFTMAX = HEADER + _BMM_HEAD + """\
            s = nl.ndarray((NT, par_dim(128), 512), dtype=np.float32, buffer=nl.sbuf)
            part = nl.ndarray((NT, par_dim(128), 1), dtype=np.float32, buffer=nl.sbuf)
            mx = nl.ndarray((par_dim(128), 1), dtype=np.float32, buffer=nl.sbuf)
            for n in nl.affine_range(NT):
                s[n, nl.arange(128)[:, None], nl.arange(512)[None, :]] = nl.copy(
                    nisa.nc_matmul(aT, rhs[nl.arange(K)[:, None], 512 * n + nl.arange(512)[None, :]]))
                part[n, nl.arange(128)[:, None], 0] = nisa.tensor_reduce(
                    nl.max, data=s[n, nl.arange(128)[:, None], nl.arange(512)[None, :]], axis=[1])
                mx[nl.arange(128)[:, None], 0] = nl.loop_reduce(part[n, nl.arange(128)[:, None], 0], op=np.max,
                                                                 loop_indices=[n])
            neg = nisa.tensor_scalar(data=mx, op0=nl.multiply, operand0=-1.0)
            e = nl.ndarray((NT, par_dim(128), 512), dtype=np.float32, buffer=nl.sbuf)
            tot = nl.ndarray((par_dim(128), 1), dtype=np.float32, buffer=nl.sbuf)
            for n in nl.affine_range(NT):
                e[n, nl.arange(128)[:, None], nl.arange(512)[None, :]] = nisa.activation(
                    op=nl.exp, data=s[n, nl.arange(128)[:, None], nl.arange(512)[None, :]], bias=neg)
                tot[nl.arange(128)[:, None], 0] = nl.loop_reduce(nisa.tensor_reduce(
                    nl.add, data=e[n, nl.arange(128)[:, None], nl.arange(512)[None, :]], axis=[1]), op=np.add,
                    loop_indices=[n])
            inv = nisa.reciprocal(data=tot)
            row = nl.ndarray((par_dim(128), N), dtype=np.float32, buffer=nl.sbuf)
            for n in nl.affine_range(NT):
                row[nl.arange(128)[:, None], 512 * n + nl.arange(512)[None, :]] = nisa.tensor_scalar(
                    data=e[n, nl.arange(128)[:, None], nl.arange(512)[None, :]], op0=nl.multiply, operand0=inv)
            nl.store(out[b, i, nl.arange(128)[:, None], nl.arange(N)[None, :]], value=row)
    return out
"""

# rmsnorm_matmul in the compiler's style: x arrives as (M/128, 128, K), w as (K/128, 128, N)
RMSNORM_MATMUL = HEADER + """\
@nki.jit
def kernel(v1, v2):
    MT, _, K = v1.shape
    KT = K // 128
    N = v2.shape[2]
    NT = N // 512
    out = nl.ndarray((MT, 128, N), dtype=np.float32, buffer=nl.shared_hbm)
    zero = nl.ndarray((par_dim(128), 1), dtype=np.float32, buffer=nl.sbuf)
    ident = nl.shared_constant(np.identity(128, dtype=np.float32))
    eye = nl.ndarray((par_dim(128), 128), dtype=np.float32, buffer=nl.sbuf)
    w = nl.ndarray((KT, par_dim(128), N), dtype=np.float32, buffer=nl.sbuf)
    ss = nl.ndarray((MT, par_dim(128), 1), dtype=np.float32, buffer=nl.sbuf)
    zero[nl.arange(128)[:, None], 0] = nisa.memset(shape=(128, 1), value=0, dtype=np.float32)
    eye[nl.arange(128)[:, None], nl.arange(128)[None, :]] = nl.load(ident[nl.arange(128)[:, None], nl.arange(128)[None, :]])
    for k in nl.affine_range(KT):
        w[k, nl.arange(128)[:, None], nl.arange(N)[None, :]] = nl.load(v2[k, nl.arange(128)[:, None], nl.arange(N)[None, :]])
    for i in nl.affine_range(MT):
        x = nl.load(v1[i, nl.arange(128)[:, None], nl.arange(K)[None, :]])
        for k in nl.affine_range(KT):
            sq = nisa.activation(op=nl.square, data=x[nl.arange(128)[:, None], 128 * k + nl.arange(128)[None, :]],
                                 bias=zero[nl.arange(128)[:, None], 0], scale=1.0)
            part = nisa.tensor_reduce(nl.add, data=nisa.tensor_scalar(data=sq, op0=nl.multiply, operand0=1.0 / K),
                                      axis=[1])
            ss[i, nl.arange(128)[:, None], 0] = nl.loop_reduce(part, op=np.add, loop_indices=[k])
        rinv = nisa.activation(op=nl.rsqrt, data=ss[i, nl.arange(128)[:, None], 0], bias=zero[nl.arange(128)[:, None], 0])
        xn = nisa.tensor_scalar(data=x, op0=nl.multiply, operand0=rinv)
        xT = nl.ndarray((KT, par_dim(128), 128), dtype=np.float32, buffer=nl.sbuf)
        for k in nl.affine_range(KT):
            xT[k, nl.arange(128)[:, None], nl.arange(128)[None, :]] = nl.copy(nisa.nc_matmul(
                xn[nl.arange(128)[:, None], 128 * k + nl.arange(128)[None, :]], eye[nl.arange(128)[:, None], nl.arange(128)[None, :]],
                is_moving_onezero=True, is_transpose=True))
        row = nl.ndarray((par_dim(128), N), dtype=np.float32, buffer=nl.sbuf)
        for n in nl.affine_range(NT):
            acc = nl.zeros((128, 512), dtype=np.float32, buffer=nl.psum)
            for k in nl.affine_range(KT):
                acc += nisa.nc_matmul(xT[k, nl.arange(128)[:, None], nl.arange(128)[None, :]],
                                      w[k, nl.arange(128)[:, None], 512 * n + nl.arange(512)[None, :]])
            row[nl.arange(128)[:, None], 512 * n + nl.arange(512)[None, :]] = nl.copy(acc)
        nl.store(out[i, nl.arange(128)[:, None], nl.arange(N)[None, :]], value=row)
    return out
"""

# the two hand-written baselines of NKIBench's style: nl.* tile code, nl.matmul, rmsnorm weights broadcast
ADD_RMSNORM_MATMUL = HEADER + """\
@nki.jit
def kernel(x_tensor, w_tensor, eps, z_tensor, g_tensor):
    M, K = x_tensor.shape
    N = w_tensor.shape[1]
    ix = nl.arange(128)[:, None]
    iy = nl.arange(K)[None, :]
    iz = nl.arange(512)[None, :]
    result = nl.ndarray((M, N), dtype=x_tensor.dtype, buffer=nl.shared_hbm)
    g_tile = nl.load(g_tensor.reshape((1, K))[nl.arange(1)[:, None], iy])
    for i in nl.affine_range(M // 128):
        a_tile = nl.add(nl.load(x_tensor[i * 128 + ix, iy]), nl.load(z_tensor[i * 128 + ix, iy]))
        mean = nl.sum(nl.square(a_tile), axis=[1]) / K
        rms_reciprocal = nl.rsqrt(nl.add(mean, eps))
        out_tile = nl.multiply(a_tile, rms_reciprocal)
        out_tile[...] = nl.multiply(out_tile, g_tile.broadcast_to((128, K)))
        for n in nl.affine_range(N // 512):
            res_psum = nl.zeros((128, 512), nl.float32, buffer=nl.psum)
            for k in nl.affine_range(K // 128):
                w_tile = nl.load(w_tensor[k * 128:(k + 1) * 128, n * 512:(n + 1) * 512])
                res_psum += nl.matmul(out_tile[:, k * 128:(k + 1) * 128], w_tile)
            nl.store(result[i * 128 + ix, n * 512 + iz], value=nl.copy(res_psum, dtype=result.dtype))
    return result
"""

MATMUL_ADD_RMSNORM = HEADER + """\
@nki.jit
def kernel(x_tensor, w_tensor, eps, z_tensor, g_tensor):
    M, K = x_tensor.shape
    N = w_tensor.shape[1]
    ix = nl.arange(128)[:, None]
    iy = nl.arange(N)[None, :]
    iz = nl.arange(512)[None, :]
    result = nl.ndarray((M, N), dtype=x_tensor.dtype, buffer=nl.shared_hbm)
    g_tile = nl.load(g_tensor.reshape((1, N))[nl.arange(1)[:, None], iy])
    for i in nl.affine_range(M // 128):
        y = nl.ndarray((128, N), dtype=x_tensor.dtype, buffer=nl.sbuf)
        x_tiles = nl.load(x_tensor[i * 128 + ix, nl.arange(K)[None, :]])
        for n in nl.affine_range(N // 512):
            res_psum = nl.zeros((128, 512), nl.float32, buffer=nl.psum)
            for k in nl.affine_range(K // 128):
                w_tile = nl.load(w_tensor[k * 128:(k + 1) * 128, n * 512:(n + 1) * 512])
                res_psum += nl.matmul(x_tiles[:, k * 128:(k + 1) * 128], w_tile)
            y[ix, n * 512 + iz] = nl.copy(res_psum, dtype=result.dtype)
        a_tile = nl.add(y, nl.load(z_tensor[i * 128 + ix, iy]))
        mean = nl.sum(nl.square(a_tile), axis=[1]) / N
        out_tile = nl.multiply(a_tile, nl.rsqrt(nl.add(mean, eps)))
        out_tile[...] = nl.multiply(out_tile, g_tile.broadcast_to((128, N)))
        nl.store(result[i * 128 + ix, iy], value=out_tile)
    return result
"""

# the GEMM chains in the compiler's style: x transposed once (Tensor Engine, identity), reused
_XT = """\
    ident = nl.shared_constant(np.identity(128, dtype=np.float32))
    eye = nl.ndarray((par_dim(128), 128), dtype=np.float32, buffer=nl.sbuf)
    eye[nl.arange(128)[:, None], nl.arange(128)[None, :]] = nl.load(ident[nl.arange(128)[:, None], nl.arange(128)[None, :]])
    xT = nl.ndarray((MT, KT, par_dim(128), 128), dtype=np.float32, buffer=nl.sbuf)
    for i in nl.affine_range(MT):
        for k in nl.affine_range(KT):
            xb = nl.load(x[128 * i + nl.arange(128)[:, None], 128 * k + nl.arange(128)[None, :]])
            xT[i, k, nl.arange(128)[:, None], nl.arange(128)[None, :]] = nl.copy(nisa.nc_matmul(
                xb, eye[nl.arange(128)[:, None], nl.arange(128)[None, :]], is_moving_onezero=True, is_transpose=True))
"""

SWIGLU = HEADER + """\
@nki.jit
def kernel(x, w_up, w_down, w_gate):
    # (silu(x @ w_gate) * (x @ w_up)) @ w_down; h is spilled to an HBM scratch tensor between the GEMMs
    M, K = x.shape
    N = w_up.shape[1]
    MT, KT, NT, FT = M // 128, K // 128, N // 128, N // 512
    out = nl.ndarray((M, K), dtype=np.float32, buffer=nl.shared_hbm)
    h = nl.ndarray((MT, 128, N), dtype=np.float32, buffer=nl.hbm, name="_spill_h")
    zero = nl.ndarray((par_dim(128), 1), dtype=np.float32, buffer=nl.sbuf)
    zero[nl.arange(128)[:, None], 0] = nisa.memset(shape=(128, 1), value=0, dtype=np.float32)
""" + _XT + """\
    for i in nl.affine_range(MT):
        for f in nl.affine_range(FT):
            g_ps = nl.zeros((128, 512), dtype=np.float32, buffer=nl.psum)
            u_ps = nl.zeros((128, 512), dtype=np.float32, buffer=nl.psum)
            for k in nl.affine_range(KT):
                wg = nl.load(w_gate[128 * k + nl.arange(128)[:, None], 512 * f + nl.arange(512)[None, :]])
                wu = nl.load(w_up[128 * k + nl.arange(128)[:, None], 512 * f + nl.arange(512)[None, :]])
                g_ps += nisa.nc_matmul(xT[i, k, nl.arange(128)[:, None], nl.arange(128)[None, :]], wg)
                u_ps += nisa.nc_matmul(xT[i, k, nl.arange(128)[:, None], nl.arange(128)[None, :]], wu)
            gate = nl.copy(g_ps)
            e = nisa.activation(op=nl.exp, data=gate, bias=zero[nl.arange(128)[:, None], 0], scale=-1.0)
            sig = nisa.reciprocal(data=nisa.tensor_scalar(data=e, op0=nl.add, operand0=1.0, reverse0=True))
            hv = nl.multiply(nl.multiply(gate, sig), u_ps)
            nl.store(h[i, nl.arange(128)[:, None], 512 * f + nl.arange(512)[None, :]], value=hv)
    for i in nl.affine_range(MT):
        hT = nl.ndarray((NT, par_dim(128), 128), dtype=np.float32, buffer=nl.sbuf)
        for j in nl.affine_range(NT):
            hb = nl.load(h[i, nl.arange(128)[:, None], 128 * j + nl.arange(128)[None, :]])
            hT[j, nl.arange(128)[:, None], nl.arange(128)[None, :]] = nl.copy(nisa.nc_matmul(
                hb, eye[nl.arange(128)[:, None], nl.arange(128)[None, :]], is_moving_onezero=True, is_transpose=True))
        for c in nl.affine_range(K // 512):
            acc = nl.zeros((128, 512), dtype=np.float32, buffer=nl.psum)
            for j in nl.affine_range(NT):
                wd = nl.load(w_down[128 * j + nl.arange(128)[:, None], 512 * c + nl.arange(512)[None, :]])
                acc += nisa.nc_matmul(hT[j, nl.arange(128)[:, None], nl.arange(128)[None, :]], wd)
            nl.store(out[128 * i + nl.arange(128)[:, None], 512 * c + nl.arange(512)[None, :]], value=nl.copy(acc))
    return out
"""

LORA = HEADER + """\
@nki.jit
def kernel(x, w, a, b):
    # x @ w + (x @ a) @ b; the K loop of x @ w runs in sequential chunks summed with nl.loop_reduce
    M, K = x.shape
    N = w.shape[1]
    R = a.shape[1]
    MT, KT, NT = M // 128, K // 128, N // 512
    CH = 2 if KT % 2 == 0 else 1
    out = nl.ndarray((M, N), dtype=np.float32, buffer=nl.shared_hbm)
""" + _XT + """\
    for i in nl.affine_range(MT):
        xa_ps = nl.zeros((128, R), dtype=np.float32, buffer=nl.psum)
        for k in nl.affine_range(KT):
            ak = nl.load(a[128 * k + nl.arange(128)[:, None], nl.arange(R)[None, :]])
            xa_ps += nisa.nc_matmul(xT[i, k, nl.arange(128)[:, None], nl.arange(128)[None, :]], ak)
        xaT = nl.copy(nisa.nc_matmul(nl.copy(xa_ps), eye[nl.arange(128)[:, None], nl.arange(128)[None, :]],
                                     is_moving_onezero=True, is_transpose=True))
        for n in nl.affine_range(NT):
            total = nl.full((par_dim(128), 512), fill_value=0.0, dtype=np.float32, buffer=nl.sbuf)
            for c in nl.sequential_range(KT // CH):
                part = nl.zeros((128, 512), dtype=np.float32, buffer=nl.psum)
                for kk in nl.affine_range(CH):
                    wk = nl.load(w[128 * (CH * c + kk) + nl.arange(128)[:, None], 512 * n + nl.arange(512)[None, :]])
                    part += nisa.nc_matmul(xT[i, CH * c + kk, nl.arange(128)[:, None], nl.arange(128)[None, :]], wk)
                total[nl.arange(128)[:, None], nl.arange(512)[None, :]] = nl.loop_reduce(part, op=np.add, loop_indices=[c])
            bn = nl.load(b[nl.arange(R)[:, None], 512 * n + nl.arange(512)[None, :]])
            low = nisa.nc_matmul(xaT, bn)
            nl.store(out[128 * i + nl.arange(128)[:, None], 512 * n + nl.arange(512)[None, :]], value=nl.add(total, low))
    return out
"""

GQA_FULL = HEADER + """\
@nki.jit
def kernel(q, k, v):
    # q (B, N, QH, D), k and v (B, N, KH, D); non-causal attention, query head h uses kv head h // (QH // KH);
    # scores of one 128-query block against all keys stay on chip, softmax with nl.loop_reduce max and sum
    B, N, QH, D = q.shape
    KH = k.shape[2]
    rep = QH // KH
    NB = N // 128
    KB = N // 512
    scale = 1.0 / float(np.sqrt(D))
    out = nl.ndarray((B, QH, N, D), dtype=np.float32, buffer=nl.shared_hbm)
    ident = nl.shared_constant(np.identity(128, dtype=np.float32))
    eye = nl.ndarray((par_dim(128), 128), dtype=np.float32, buffer=nl.sbuf)
    eye[nl.arange(128)[:, None], nl.arange(128)[None, :]] = nl.load(ident[nl.arange(128)[:, None], nl.arange(128)[None, :]])
    for bb in nl.affine_range(B):
        for hk in nl.affine_range(KH):
            kT = nl.ndarray((par_dim(D), N), dtype=np.float32, buffer=nl.sbuf)
            vv = nl.ndarray((NB, par_dim(128), D), dtype=np.float32, buffer=nl.sbuf)
            for j in nl.affine_range(NB):
                kb = nl.load(k[bb, 128 * j + nl.arange(128)[:, None], hk, nl.arange(D)[None, :]])
                kT[nl.arange(D)[:, None], 128 * j + nl.arange(128)[None, :]] = nl.copy(nisa.nc_matmul(
                    kb, eye[nl.arange(128)[:, None], nl.arange(128)[None, :]], is_moving_onezero=True, is_transpose=True))
                vv[j, nl.arange(128)[:, None], nl.arange(D)[None, :]] = nl.load(
                    v[bb, 128 * j + nl.arange(128)[:, None], hk, nl.arange(D)[None, :]])
            for r in nl.affine_range(rep):
                for qb in nl.affine_range(NB):
                    qt = nl.load(q[bb, 128 * qb + nl.arange(128)[:, None], rep * hk + r, nl.arange(D)[None, :]])
                    qT = nl.copy(nisa.nc_matmul(qt, eye[nl.arange(128)[:, None], nl.arange(128)[None, :]],
                                                is_moving_onezero=True, is_transpose=True))
                    s = nl.ndarray((KB, par_dim(128), 512), dtype=np.float32, buffer=nl.sbuf)
                    mx = nl.ndarray((par_dim(128), 1), dtype=np.float32, buffer=nl.sbuf)
                    for c in nl.affine_range(KB):
                        s[c, nl.arange(128)[:, None], nl.arange(512)[None, :]] = nisa.tensor_scalar(
                            data=nisa.nc_matmul(qT, kT[nl.arange(D)[:, None], 512 * c + nl.arange(512)[None, :]]),
                            op0=nl.multiply, operand0=scale)
                        mx[nl.arange(128)[:, None], 0] = nl.loop_reduce(nisa.tensor_reduce(
                            nl.max, data=s[c, nl.arange(128)[:, None], nl.arange(512)[None, :]], axis=[1]), op=np.max,
                            loop_indices=[c])
                    neg = nisa.tensor_scalar(data=mx, op0=nl.multiply, operand0=-1.0)
                    tot = nl.ndarray((par_dim(128), 1), dtype=np.float32, buffer=nl.sbuf)
                    acc = nl.zeros((128, D), dtype=np.float32, buffer=nl.psum)
                    for c in nl.affine_range(KB):
                        e = nisa.activation(op=nl.exp, data=s[c, nl.arange(128)[:, None], nl.arange(512)[None, :]], bias=neg)
                        tot[nl.arange(128)[:, None], 0] = nl.loop_reduce(
                            nisa.tensor_reduce(nl.add, data=e, axis=[1]), op=np.add, loop_indices=[c])
                        for j in nl.affine_range(4):
                            eT = nl.copy(nisa.nc_matmul(e[nl.arange(128)[:, None], 128 * j + nl.arange(128)[None, :]],
                                                        eye[nl.arange(128)[:, None], nl.arange(128)[None, :]],
                                                        is_moving_onezero=True, is_transpose=True))
                            acc += nisa.nc_matmul(eT, vv[4 * c + j, nl.arange(128)[:, None], nl.arange(D)[None, :]])
                    res = nisa.tensor_scalar(data=acc, op0=nl.multiply, operand0=nisa.reciprocal(data=tot))
                    nl.store(out[bb, rep * hk + r, 128 * qb + nl.arange(128)[:, None], nl.arange(D)[None, :]], value=res)
    return out
"""

KERNELS: dict[str, str] = {
    "silu": SILU, "adamw": ADAMW, "rope_single_freq_apply": ROPE, "mamba": MAMBA, "matmul": MATMUL,
    "transpose_matmul": TRANSPOSE_MATMUL, "bmm": BMM, "bmm_softmax": BMM_SOFTMAX, "rmsnorm_matmul": RMSNORM_MATMUL,
    "add_rmsnorm_matmul": ADD_RMSNORM_MATMUL, "matmul_add_rmsnorm": MATMUL_ADD_RMSNORM, "swiglu": SWIGLU,
    "lora": LORA, "gqa_full": GQA_FULL,
}

TO_NKI: dict[str, str] = {
    "silu": "    return [np.reshape(inputs[0], (128, M // 128, N))]",
    "matmul": "    return [np.reshape(inputs[0], (M // 128, 128, K // 128, 128)), np.reshape(inputs[1], (K // 128, 128, N))]",
    "transpose_matmul": "    return [np.reshape(inputs[0], (128, K // 128, M)), np.reshape(inputs[1], (128, K // 128, N))]",
    "rmsnorm_matmul": "    return [np.reshape(inputs[0], (M // 128, 128, K)), np.reshape(inputs[1], (K // 128, 128, N))]",
}
