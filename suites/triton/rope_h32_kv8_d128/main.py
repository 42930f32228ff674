"""Rotary position embedding (rotate-half / NeoX layout) on q [B, Hq, S, D] and k [B, Hk, S, D]
with cos/sin [S, D]: one program per (batch*head, BLOCK_SEQ positions), in fp32."""

import torch
import triton
import triton.language as tl

BLOCK_SEQ = 16
NUM_WARPS = 4


@triton.jit
def _rope_kernel(x_ptr, cos_ptr, sin_ptr, out_ptr, seq_len, HEAD_DIM: tl.constexpr, HALF: tl.constexpr,
                 BLOCK_S: tl.constexpr):
    bh = tl.program_id(0).to(tl.int64)
    s = tl.program_id(1) * BLOCK_S + tl.arange(0, BLOCK_S)
    d = tl.arange(0, HALF)
    s_mask = (s < seq_len)[:, None]
    row = (bh * seq_len + s)[:, None] * HEAD_DIM
    x1 = tl.load(x_ptr + row + d[None, :], mask=s_mask, other=0.0).to(tl.float32)
    x2 = tl.load(x_ptr + row + HALF + d[None, :], mask=s_mask, other=0.0).to(tl.float32)
    cs = s[:, None] * HEAD_DIM
    c1 = tl.load(cos_ptr + cs + d[None, :], mask=s_mask, other=0.0).to(tl.float32)
    c2 = tl.load(cos_ptr + cs + HALF + d[None, :], mask=s_mask, other=0.0).to(tl.float32)
    s1 = tl.load(sin_ptr + cs + d[None, :], mask=s_mask, other=0.0).to(tl.float32)
    s2 = tl.load(sin_ptr + cs + HALF + d[None, :], mask=s_mask, other=0.0).to(tl.float32)
    dt = out_ptr.dtype.element_ty
    tl.store(out_ptr + row + d[None, :], (x1 * c1 - x2 * s1).to(dt), mask=s_mask)
    tl.store(out_ptr + row + HALF + d[None, :], (x2 * c2 + x1 * s2).to(dt), mask=s_mask)


def _apply(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, out: torch.Tensor) -> None:
    batch_size, heads, seq_len, head_dim = x.shape
    grid = (batch_size * heads, triton.cdiv(seq_len, BLOCK_SEQ))
    _rope_kernel[grid](x, cos, sin, out, seq_len, HEAD_DIM=head_dim, HALF=head_dim // 2, BLOCK_S=BLOCK_SEQ,
                       num_warps=NUM_WARPS)


def run(q: torch.Tensor, k: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, q_embed: torch.Tensor,
        k_embed: torch.Tensor) -> None:
    _apply(q, cos, sin, q_embed)
    _apply(k, cos, sin, k_embed)
