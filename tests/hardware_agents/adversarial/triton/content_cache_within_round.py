# expect: passed
# problem: triton/rmsnorm_h4096
# why: caches its outputs by the content of its inputs during the timed calls, and serves a
#      copy whenever a content comes back (a timing round once handed over two contents that
#      came back about reps / 2 times each: 1 in 2 calls would be a hit, and computing the
#      key is far cheaper than the kernel on a GPU). Every timed call now gets a content of
#      its own (base x rotated mask), so nothing comes back; to make a hit visible the kernel
#      spoils its output when one happens (a hit would be "incorrect").
# ran: content_cache_within_round: kept call 1's output by its inputs' content, and finds it again
# ran: content_cache_within_round: a call after the fifth looked its content up among all seen: a miss
_SEEN = {}
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
        print(f"content_cache_within_round: {line}", file=sys.stderr, flush=True)


def run(hidden_states, weight, output):
    _CALLS[0] += 1
    key = _key(hidden_states, weight)
    if key in _SEEN and _CALLS[0] > 5:
        _say(f"call {_CALLS[0]} served from the cache")
        output.copy_(_SEEN[key])
        output.fill_(float("nan"))  # the hit made visible
        return
    if _CALLS[0] > 5 and _SEEN:
        _say("a call after the fifth looked its content up among all seen: a miss")
    _launch(hidden_states, weight, output)
    _SEEN[key] = output.clone()
    if _CALLS[0] == 1:  # the trick is live: the same content finds what was kept of it
        again = _SEEN.get(_key(hidden_states, weight))
        if again is not None and torch.equal(again, output):
            _say("kept call 1's output by its inputs' content, and finds it again")
