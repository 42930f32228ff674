# expect: passed
# problem: triton/rmsnorm_h4096
# why: caches outputs by the content of the inputs, as seen in the correctness checks, and
#      serves them when the same content comes back. The timed inputs are fresh (drawn where
#      the kernel cannot read them, handed over round by round), so a content seen in the
#      checks never comes back; to make a hit visible the kernel spoils its output when one
#      happens (a hit would be "incorrect", the miss it gets is "passed").
# ran: content_cache: kept call 1's output by its inputs' content, and finds it again
# ran: content_cache: a call after the fifth looked its content up among the kept ones: a miss
_CHECKED = {}
_CALLS = [0]
_SAID = set()

import sys

import torch
import triton
import triton.language as tl


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


def _key(*ts):
    return tuple(hash(t.float().sum().item() * 1e6 + t.float().abs().max().item()) for t in ts)


def _say(line):
    """Tell the trusted side, once, how far the trick got (its stderr; never the verdict)."""
    if line not in _SAID:
        _SAID.add(line)
        print(f"content_cache: {line}", file=sys.stderr, flush=True)


def run(hidden_states, weight, output):
    _CALLS[0] += 1
    key = _key(hidden_states, weight)
    if key in _CHECKED and _CALLS[0] > 5:
        _say(f"call {_CALLS[0]} served from the cache")
        output.copy_(_CHECKED[key])
        output.fill_(float("nan"))  # the hit made visible
        return
    if _CALLS[0] > 5 and _CHECKED:
        _say("a call after the fifth looked its content up among the kept ones: a miss")
    _launch(hidden_states, weight, output)
    if _CALLS[0] <= 5:
        _CHECKED[key] = output.clone()
        if _CALLS[0] == 1:  # the trick is live: the same content finds what was kept of it
            again = _CHECKED.get(_key(hidden_states, weight))
            if again is not None and torch.equal(again, output):
                _say("kept call 1's output by its inputs' content, and finds it again")
