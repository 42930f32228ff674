# expect: incorrect
# expect_gpu: passed
# problem: triton/gemm_fp16
# needle: boundary-M-
# why: the suite's GEMM with its row tiles counted as `max(1, M // BLOCK_M)` instead of
#      `cdiv(M, BLOCK_M)`: the last partial tile of rows after whole ones is never computed
#      (the harness's NaN stays in those rows of C); M of 64 or less is one partial tile and
#      right. The check workloads (M = 33 and 16) are single partial tiles, and the GPU's
#      production M (4096) is whole tiles only, so both passed it; the interpreter's boundary
#      workloads with M = 65, 127 and 129 (a whole tile and a partial one) catch it. On a
#      GPU, which checks only the production and check workloads, it still passes. Its
#      honest twin, with cdiv, is honest_twin_of_wrong_in_last_partial_block.py.
"""C = A @ B.T in fp16 with fp32 accumulation: one program per (BLOCK_M x BLOCK_N) tile of C,
looping over K in BLOCK_K steps."""

import torch
import triton
import triton.language as tl

BLOCK_M = 64
BLOCK_N = 64
BLOCK_K = 32
NUM_WARPS = 4
NUM_STAGES = 2


@triton.jit
def _gemm_kernel(a_ptr, b_ptr, c_ptr, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    rm = pid_m * BM + tl.arange(0, BM)
    rn = pid_n * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k0 in range(0, K, BK):
        kk = k0 + rk
        a = tl.load(
            a_ptr + rm[:, None].to(tl.int64) * K + kk[None, :],
            mask=(rm[:, None] < M) & (kk[None, :] < K),
            other=0.0,
        )
        b = tl.load(
            b_ptr + rn[None, :].to(tl.int64) * K + kk[:, None],
            mask=(rn[None, :] < N) & (kk[:, None] < K),
            other=0.0,
        )
        acc += tl.dot(a, b)
    c_mask = (rm[:, None] < M) & (rn[None, :] < N)
    tl.store(c_ptr + rm[:, None].to(tl.int64) * N + rn[None, :], acc.to(c_ptr.dtype.element_ty), mask=c_mask)


def run(A: torch.Tensor, B: torch.Tensor, C: torch.Tensor) -> None:
    M, K = A.shape
    N = B.shape[0]
    grid = (max(1, M // BLOCK_M), triton.cdiv(N, BLOCK_N))  # whole row tiles only, past the first
    _gemm_kernel[grid](
        A, B, C, M, N, K, BM=BLOCK_M, BN=BLOCK_N, BK=BLOCK_K, num_warps=NUM_WARPS, num_stages=NUM_STAGES
    )
