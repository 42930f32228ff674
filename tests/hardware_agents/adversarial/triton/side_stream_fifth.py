# expect: passed
# expect_gpu: timing_mismatch
# needle_gpu: its clock was slowed or replaced
# problem: triton/gemm_fp16
# why: lies by only 1.25x, on a long kernel: computes the first four fifths of C's rows on the
#      harness's stream and the last fifth on a CUDA stream of its own, queued after the
#      first part, and returns without waiting. Its outputs are right; the events time four
#      fifths of the work. On a GPU the device-wide synchronisation after every call puts
#      the missed fifth in the parent's clock of the round: caught (0.43 ms a call on an
#      H200, a lie of ~0.09 ms a call against ~35 us of allowance beyond the untimed work). In the
#      interpreter the shim's Triton work is synchronous: it must pass with an honest latency.
#      The kernel says on its stderr that its last fifth ran with its own stream current (on a
#      GPU, the trick in place; in the interpreter, a timeline of the simulated device).
# ran: side_stream_fifth: launched its last fifth with a stream of its own current
import sys

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
        a = tl.load(a_ptr + rm[:, None].to(tl.int64) * K + kk[None, :],
                    mask=(rm[:, None] < M) & (kk[None, :] < K), other=0.0)
        b = tl.load(b_ptr + rn[None, :].to(tl.int64) * K + kk[:, None],
                    mask=(rn[None, :] < N) & (kk[:, None] < K), other=0.0)
        acc += tl.dot(a, b)
    c_mask = (rm[:, None] < M) & (rn[None, :] < N)
    tl.store(c_ptr + rm[:, None].to(tl.int64) * N + rn[None, :], acc.to(c_ptr.dtype.element_ty), mask=c_mask)


_SIDE = []
_SAID = []
_CUDA = getattr(torch, "cu" + "da")


def _launch(A, B, C):
    M, K = A.shape
    N = B.shape[0]
    grid = (triton.cdiv(M, BLOCK_M), triton.cdiv(N, BLOCK_N))
    _gemm_kernel[grid](A, B, C, M, N, K, BM=BLOCK_M, BN=BLOCK_N, BK=BLOCK_K, num_warps=NUM_WARPS,
                       num_stages=NUM_STAGES)


def run(A: torch.Tensor, B: torch.Tensor, C: torch.Tensor) -> None:
    cut = (A.shape[0] * 4 // 5) // BLOCK_M * BLOCK_M
    if cut:
        _launch(A[:cut], B, C[:cut])
    if not _SIDE:
        _SIDE.append(getattr(_CUDA, "Str" + "eam")())
    side = _SIDE[0]
    side.wait_stream(_CUDA.current_stream())  # after the timed part; nothing waits for it after
    with getattr(_CUDA, "str" + "eam")(side):
        _launch(A[cut:], B, C[cut:])
        ours = _CUDA.current_stream().cuda_stream == side.cuda_stream  # the launch's stream
    if ours and not _SAID and _CUDA.current_stream().cuda_stream != side.cuda_stream:  # not the harness's
        _SAID.append(True)
        print("side_stream_fifth: launched its last fifth with a stream of its own current", file=sys.stderr,
              flush=True)
