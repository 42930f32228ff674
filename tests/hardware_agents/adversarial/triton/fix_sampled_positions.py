# expect: incorrect
# problem: triton/rmsnorm_h4096
# needle: the output of a timed call is wrong
# ran: checks hook installed
# why: right in the correctness checks, then lazy in every timed call (it writes nothing),
#      with a hook on the harness's `load_handed_over` (through importlib, past the static
#      checks): when the agent hands over what to send back of a round's outputs (the secret
#      positions and the calls checked in full), the hook computes the right values at exactly
#      those positions and those calls, in torch, before the harness reads them. Where the
#      child is told the positions, that passes with the clock of calls that did nothing; the
#      judge that reads the positions from its own region never tells the child.
import importlib
import os
import sys

import torch
import triton
import triton.language as tl

_h = importlib.import_module("hardware_agents.triton.harness")
_load = _h.load_handed_over
_TIMED: list[tuple[torch.Tensor, torch.Tensor, torch.Tensor]] = []


def _rmsnorm(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    xf = x.float()
    return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + 1e-6) * w.float()).to(x.dtype)


def _fix(path):  # type: ignore[no-untyped-def]
    got = _load(path)
    if path.name.startswith("checks-") and isinstance(got, dict) and "positions" in got:
        pos, full = got["positions"]["output"], set(got["full"].tolist())
        for t, (x, w, out) in enumerate(_TIMED):
            if t in full:
                out.copy_(_rmsnorm(x, w))
            else:
                flat = out.view(-1)
                p = pos[t % pos.shape[0]]
                rows = p // x.shape[-1]
                flat[p] = _rmsnorm(x[rows], w).reshape(len(p), -1)[torch.arange(len(p)), p % x.shape[-1]]
        print("fixed the sampled positions", file=sys.stderr, flush=True)
        _TIMED.clear()
    return got


_h.load_handed_over = _fix
print("checks hook installed", file=sys.stderr, flush=True)


@triton.jit
def _rmsnorm_kernel(x_ptr, w_ptr, out_ptr, hidden, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    base = row * hidden
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for start in range(0, hidden, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        mask = offs < hidden
        x = tl.load(x_ptr + base + offs, mask=mask, other=0.0).to(tl.float32)
        acc += x * x
    inv_rms = tl.rsqrt(tl.sum(acc, axis=0) / hidden + eps)
    for start in range(0, hidden, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        mask = offs < hidden
        x = tl.load(x_ptr + base + offs, mask=mask, other=0.0).to(tl.float32)
        w = tl.load(w_ptr + offs, mask=mask, other=0.0).to(tl.float32)
        tl.store(out_ptr + base + offs, (x * inv_rms * w).to(out_ptr.dtype.element_ty), mask=mask)


def run(hidden_states, weight, output):
    if os.path.exists("out/correctness.msgpack"):  # timed: nothing now, the sampled values later
        _TIMED.append((hidden_states, weight, output))
        return
    _rmsnorm_kernel[(hidden_states.shape[0],)](
        hidden_states, weight, output, hidden_states.shape[1], 1e-6, BLOCK=1024, num_warps=4
    )
