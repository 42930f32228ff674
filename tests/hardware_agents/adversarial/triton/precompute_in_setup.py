# expect: timing_mismatch
# problem: triton/rmsnorm_h4096
# needle: work done before the clock started
# why: computes a timing round's outputs during the round's set-up, before the clock starts:
#      it replaces the harness's stocking function (through the module's attribute, past the
#      static checks), and as each buffer set is stocked with a call's inputs it runs the
#      kernel on them and keeps the output by the inputs' address; the timed calls then only
#      copy it. Every output is right and the calls' clock agrees with their wall time, so
#      only the set-up's own bound catches it: a set-up may take what the calibration rounds'
#      set-ups took (the same file size, the same sets, before the kernel existed) plus a
#      margin, and a round whose set-up and calls together ran past that is rejected (then
#      again in the extra rounds). Its device time is modelled with torch.cuda._sleep.
# ran: precompute_in_setup: a timed call served an output computed in its round's set-up
import sys

import torch
import triton
import triton.language as tl

_CUDA = getattr(torch, "cu" + "da")
_CYCLES = 20_000_000
_ti = __import__("hardware_agents.triton.timed_inputs", fromlist=["_"])
_derive = getattr(_ti, "derive_into")
_DONE = {}  # a stocked set's hidden_states address -> the output computed while it was stocked
_PENDING = []
_TOLD = [False]


def _stock(dst, base, mask, shift):
    _derive(dst, base, mask, shift)
    if dst.dim() == 2:
        _PENDING[:] = [dst]
    elif dst.dim() == 1 and _PENDING:  # the set's weight follows its hidden_states: the set is complete
        x = _PENDING.pop()
        out = torch.empty_like(x)
        _launch(x, dst, out)
        _DONE[x.data_ptr()] = out


setattr(_ti, "derive_into", _stock)


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


def _launch(hidden_states, weight, output):
    _rmsnorm_kernel[(hidden_states.shape[0],)](hidden_states, weight, output, hidden_states.shape[1], 1e-6,
                                               BLOCK=1024, num_warps=4)
    _CUDA._sleep(_CYCLES)  # its device time: 20 ms on the simulated device (about 10 ms on a GPU)


def run(hidden_states, weight, output):
    done = _DONE.pop(hidden_states.data_ptr(), None)
    if done is None:
        _launch(hidden_states, weight, output)
        return
    output.copy_(done)
    if not _TOLD[0]:
        _TOLD[0] = True
        print("precompute_in_setup: a timed call served an output computed in its round's set-up", file=sys.stderr,
              flush=True)
