"""A small paged, causal prefill attention (FlashInfer-Bench's gqa_paged_prefill_causal shape,
at 4 query heads, 2 key/value heads, head_dim 16, page size 4 with `kv_last_page_len`), an
honest Triton kernel for it, and mutants of that kernel, each wrong in one way a single-sequence
check cannot see: the first sequence only, the last page of each sequence dropped, the causal
mask off by one, one head only."""

from __future__ import annotations

from typing import Any

import flashinfer_bench as fib
from flashinfer_bench.data.workload import ScalarInput

NAME = "gqa_paged_prefill_causal_h4_kv2_d16_ps4"

REFERENCE = """import torch


@torch.no_grad()
def run(q, k_cache, v_cache, qo_indptr, kv_indptr, kv_indices, kv_last_page_len, sm_scale):
    total_q, num_qo_heads, head_dim = q.shape
    _, page_size, num_kv_heads, _ = k_cache.shape
    out = torch.zeros((total_q, num_qo_heads, head_dim), dtype=torch.float32)
    ratio = num_qo_heads // num_kv_heads
    for b in range(qo_indptr.shape[0] - 1):
        q0, q1 = int(qo_indptr[b]), int(qo_indptr[b + 1])
        p0, p1 = int(kv_indptr[b]), int(kv_indptr[b + 1])
        if q0 >= q1 or p0 >= p1:
            continue
        pages = kv_indices[p0:p1].long()
        kv_len = (p1 - p0 - 1) * page_size + int(kv_last_page_len[b])
        k = k_cache[pages].reshape(-1, num_kv_heads, head_dim)[:kv_len].float()
        v = v_cache[pages].reshape(-1, num_kv_heads, head_dim)[:kv_len].float()
        k = k.repeat_interleave(ratio, dim=1)
        v = v.repeat_interleave(ratio, dim=1)
        qb = q[q0:q1].float()
        logits = torch.einsum("qhd,khd->qhk", qb, k) * sm_scale
        delta = kv_len - (q1 - q0)
        allowed = torch.arange(kv_len)[None, :] <= torch.arange(q1 - q0)[:, None] + delta
        logits = logits.masked_fill(~allowed[:, None, :], float("-inf"))
        out[q0:q1] = torch.einsum("qhk,khd->qhd", torch.softmax(logits, dim=-1), v)
    return out.to(q.dtype)
"""

KERNEL = """import torch
import triton
import triton.language as tl


@triton.jit
def _attn(q_ptr, k_ptr, v_ptr, o_ptr, seq_ptr, qo_ptr, kv_ptr, idx_ptr, last_ptr, sm_scale,
          H: tl.constexpr, KVH: tl.constexpr, D: tl.constexpr, P: tl.constexpr, BLOCK_N: tl.constexpr):
    i = tl.program_id(0)
    h = tl.program_id(1)
    b = tl.load(seq_ptr + i)
    q0 = tl.load(qo_ptr + b)
    q1 = tl.load(qo_ptr + b + 1)
    p0 = tl.load(kv_ptr + b)
    p1 = tl.load(kv_ptr + b + 1)
    kv_len = (p1 - p0 - 1) * P + tl.load(last_ptr + b)
    limit = (i - q0) + kv_len - (q1 - q0)  # the last key position this query sees (causal)
    kvh = h // (H // KVH)
    d = tl.arange(0, D)
    q = tl.load(q_ptr + (i * H + h) * D + d)
    m = -float("inf")
    l = 0.0
    acc = tl.zeros([D], dtype=tl.float32)
    for start in range(0, kv_len, BLOCK_N):
        t = start + tl.arange(0, BLOCK_N)
        ok = (t < kv_len) & (t <= limit)
        page = tl.load(idx_ptr + p0 + t // P, mask=t < kv_len, other=0)
        row = (page * P + t % P) * KVH + kvh
        k = tl.load(k_ptr + row[:, None] * D + d[None, :], mask=ok[:, None], other=0.0)
        s = tl.where(ok, tl.sum(k * q[None, :], axis=1) * sm_scale, -float("inf"))
        m_new = tl.maximum(m, tl.max(s, axis=0))
        alpha = tl.exp(m - m_new)
        p = tl.where(ok, tl.exp(s - m_new), 0.0)
        v = tl.load(v_ptr + row[:, None] * D + d[None, :], mask=ok[:, None], other=0.0)
        acc = acc * alpha + tl.sum(p[:, None] * v, axis=0)
        l = l * alpha + tl.sum(p, axis=0)
        m = m_new
    tl.store(o_ptr + (i * H + h) * D + d, acc / l)


def run(q, k_cache, v_cache, qo_indptr, kv_indptr, kv_indices, kv_last_page_len, sm_scale):
    total_q, H, D = q.shape
    P, KVH = k_cache.shape[1], k_cache.shape[2]
    lens = (qo_indptr[1:] - qo_indptr[:-1]).long()
    batches = torch.arange(lens.numel(), dtype=torch.int32)
    seq = torch.repeat_interleave(batches, lens)
    out = torch.zeros_like(q)
    _attn[(total_q, H)](q, k_cache, v_cache, out, seq, qo_indptr, kv_indptr, kv_indices, kv_last_page_len,
                        sm_scale, H=H, KVH=KVH, D=D, P=P, BLOCK_N=16)
    return out
"""

# (what it gets wrong, the edit to the honest kernel)
MUTANTS: dict[str, tuple[str, str]] = {
    "first sequence only": (
        "_attn[(total_q, H)](",
        "total_q = int(qo_indptr[1])\n    _attn[(total_q, H)](",
    ),
    "last page dropped": (
        "kv_len = (p1 - p0 - 1) * P + tl.load(last_ptr + b)",
        "kv_len = tl.maximum((p1 - p0 - 1) * P, 1)",
    ),
    "causal mask off by one": ("ok = (t < kv_len) & (t <= limit)", "ok = (t < kv_len) & (t <= limit + 1)"),
    "one head only": ("_attn[(total_q, H)](", "_attn[(total_q, 1)]("),
}


def mutant(which: str) -> str:
    old, new = MUTANTS[which]
    assert old in KERNEL, which
    return KERNEL.replace(old, new)


def definition() -> fib.Definition:
    return fib.Definition(
        name=NAME,
        op_type="gqa_paged",
        description="Batched GQA prefill with a paged KV cache (page size 4). Causal mask is applied.",
        axes={
            "num_qo_heads": fib.AxisConst(value=4),
            "num_kv_heads": fib.AxisConst(value=2),
            "head_dim": fib.AxisConst(value=16),
            "page_size": fib.AxisConst(value=4),
            "batch_size": fib.AxisVar(),
            "len_indptr": fib.AxisVar(),
            "total_q": fib.AxisVar(),
            "num_kv_indices": fib.AxisVar(),
            "num_pages": fib.AxisVar(),
        },
        constraints=[
            "len_indptr == batch_size + 1",
            "total_q == qo_indptr[-1].item()",
            "num_kv_indices == kv_indptr[-1].item()",
        ],
        inputs={
            "q": fib.TensorSpec(shape=["total_q", "num_qo_heads", "head_dim"], dtype="float32"),
            "k_cache": fib.TensorSpec(
                shape=["num_pages", "page_size", "num_kv_heads", "head_dim"], dtype="float32"
            ),
            "v_cache": fib.TensorSpec(
                shape=["num_pages", "page_size", "num_kv_heads", "head_dim"], dtype="float32"
            ),
            "qo_indptr": fib.TensorSpec(shape=["len_indptr"], dtype="int32"),
            "kv_indptr": fib.TensorSpec(shape=["len_indptr"], dtype="int32"),
            "kv_indices": fib.TensorSpec(shape=["num_kv_indices"], dtype="int32"),
            "kv_last_page_len": fib.TensorSpec(shape=["batch_size"], dtype="int32"),
            "sm_scale": fib.TensorSpec(shape=None, dtype="float32"),
        },
        outputs={"output": fib.TensorSpec(shape=["total_q", "num_qo_heads", "head_dim"], dtype="float32")},
        reference=REFERENCE,
    )


def production_workload(uuid: str = "w-prod") -> fib.Workload:
    """A production-sized workload whose index blobs are not in the folder (as published)."""
    blob = f"./blob/workloads/gqa_paged/{NAME}/{NAME}_gone.safetensors"
    inputs: dict[str, Any] = {
        n: fib.SafetensorsInput(path=blob, tensor_key=n)
        for n in ("qo_indptr", "kv_indptr", "kv_indices", "kv_last_page_len")
    }
    inputs.update(
        {n: fib.RandomInput() for n in ("q", "k_cache", "v_cache")} | {"sm_scale": ScalarInput(value=0.25)}
    )
    axes = {
        "batch_size": 64,
        "len_indptr": 65,
        "total_q": 30_000,
        "num_kv_indices": 9_000,
        "num_pages": 40_000,
    }
    return fib.Workload(uuid=uuid, axes=axes, inputs=inputs)
