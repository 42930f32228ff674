"""Grouped-query attention decode over a paged KV cache (page size 1): one program per
(request, KV head) handles the query heads of its group, streaming the request's pages in
BLOCK_KV chunks with an online softmax in fp32. Also writes the base-2 log-sum-exp."""

import torch
import triton
import triton.language as tl

BLOCK_KV = 32
NUM_WARPS = 4


@triton.jit
def _gqa_decode_kernel(q_ptr, k_ptr, v_ptr, indptr_ptr, indices_ptr, out_ptr, lse_ptr, sm_scale,
                       NUM_QO: tl.constexpr, NUM_KV: tl.constexpr, GROUP: tl.constexpr, HEAD_DIM: tl.constexpr,
                       BLOCK: tl.constexpr):
    b = tl.program_id(0).to(tl.int64)
    kh = tl.program_id(1)
    g = tl.arange(0, GROUP)
    d = tl.arange(0, HEAD_DIM)
    heads = kh * GROUP + g
    q = tl.load(q_ptr + (b * NUM_QO + heads)[:, None] * HEAD_DIM + d[None, :]).to(tl.float32)
    start = tl.load(indptr_ptr + b)
    end = tl.load(indptr_ptr + b + 1)
    m = tl.full([GROUP], float("-inf"), dtype=tl.float32)
    l_sum = tl.zeros([GROUP], dtype=tl.float32)
    acc = tl.zeros([GROUP, HEAD_DIM], dtype=tl.float32)
    for pos in range(start, end, BLOCK):
        n = pos + tl.arange(0, BLOCK)
        valid = n < end
        page = tl.load(indices_ptr + n, mask=valid, other=0).to(tl.int64)
        kv_off = (page * NUM_KV + kh)[:, None] * HEAD_DIM + d[None, :]
        k = tl.load(k_ptr + kv_off, mask=valid[:, None], other=0.0).to(tl.float32)
        v = tl.load(v_ptr + kv_off, mask=valid[:, None], other=0.0).to(tl.float32)
        s = tl.sum(q[:, None, :] * k[None, :, :], axis=2) * sm_scale
        s = tl.where(valid[None, :], s, float("-inf"))
        m_new = tl.maximum(m, tl.max(s, axis=1))
        alpha = tl.exp(m - m_new)
        p = tl.exp(s - m_new[:, None])
        l_sum = l_sum * alpha + tl.sum(p, axis=1)
        acc = acc * alpha[:, None] + tl.sum(p[:, :, None] * v[None, :, :], axis=1)
        m = m_new
    has = l_sum > 0
    out = tl.where(has[:, None], acc / tl.where(has, l_sum, 1.0)[:, None], 0.0)
    tl.store(out_ptr + (b * NUM_QO + heads)[:, None] * HEAD_DIM + d[None, :], out.to(out_ptr.dtype.element_ty))
    lse = tl.where(has, (m + tl.log(tl.where(has, l_sum, 1.0))) * 1.4426950408889634, float("-inf"))
    tl.store(lse_ptr + b * NUM_QO + heads, lse)


def run(q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor, kv_indptr: torch.Tensor,
        kv_indices: torch.Tensor, sm_scale: float, output: torch.Tensor, lse: torch.Tensor) -> None:
    batch_size, num_qo_heads, head_dim = q.shape
    num_kv_heads = k_cache.shape[2]
    grid = (batch_size, num_kv_heads)
    _gqa_decode_kernel[grid](q, k_cache, v_cache, kv_indptr, kv_indices, output, lse, sm_scale,
                             NUM_QO=num_qo_heads, NUM_KV=num_kv_heads, GROUP=num_qo_heads // num_kv_heads,
                             HEAD_DIM=head_dim, BLOCK=BLOCK_KV, num_warps=NUM_WARPS)
