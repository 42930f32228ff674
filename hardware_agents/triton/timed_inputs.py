"""Every timed call's inputs are new: derived from a round's base contents by a fresh
per-element mask, the same way in the kernel's child and in the reference child.

A timing round hands the kernel's child `per_round` base contents (fresh seeds, never seen
in the checks) and one mask per float input: positive powers of two (1/2, 1, 2) drawn at
random, `period` elements long and stored twice over, so that a contiguous slice
`mask[shift : shift + period]` is a rotation of it. Call t of the round gets

    x_t = base[content_t] * mask[shift_t : shift_t + period]   (broadcast over blocks of `period`)

Scaling by a power of two is exact in every float format (barring overflow), and the child
and the reference child run the same torch op on the same device, so both hold the same
bits. Signs are kept (inputs that must be positive stay positive). Integer and boolean
inputs (indices, lengths) are copied as they are. No call's content equals another's, nor a
run of values of one: a cache keyed on content (or on runs of it) never hits, and no
algebra rebuilds f(x_t) from outputs already computed (the mask is per element).
"""

from __future__ import annotations

import math

import torch

MASK_VALUES = (0.5, 1.0, 2.0)
MAX_PERIOD = 1 << 22  # elements; a mask is at most 2 x this long


def maskable(dtype: torch.dtype) -> bool:
    """Float inputs that torch multiplies on every device (fp8 has no elementwise math)."""
    return dtype.is_floating_point and dtype.itemsize >= 2


def mask_period(numel: int) -> int:
    """The mask's period for an input of `numel` elements: the whole input when it is small,
    else the largest divisor of it up to MAX_PERIOD (the input is viewed as blocks of it)."""
    if numel <= MAX_PERIOD:
        return max(numel, 1)
    for p in range(MAX_PERIOD, MAX_PERIOD // 64, -1):
        if numel % p == 0:
            return p
    return numel  # no usable divisor: one period over the whole input


def make_mask(numel: int, dtype: torch.dtype, gen: torch.Generator) -> torch.Tensor:
    """A random mask of the input's period, stored twice over (length 2 x period)."""
    period = mask_period(numel)
    codes = torch.randint(0, len(MASK_VALUES), (period,), generator=gen)
    values = torch.tensor(MASK_VALUES, dtype=torch.float32)[codes].to(dtype)
    return torch.cat([values, values])


def derive_into(dst: torch.Tensor, base: torch.Tensor, mask: torch.Tensor | None, shift: int) -> None:
    """Write call content `base * rotation(mask, shift)` into `dst` (same shape and dtype as
    `base`); without a mask, a copy."""
    if mask is None:
        dst.copy_(base)
        return
    period = mask.numel() // 2
    n = base.numel()
    if n == 0:
        return
    window = mask[shift % period : shift % period + period]
    torch.mul(base.reshape(-1, period), window, out=dst.view(-1, period))


def derive(base: torch.Tensor, mask: torch.Tensor | None, shift: int) -> torch.Tensor:
    out = torch.empty_like(base)
    derive_into(out, base, mask, shift)
    return out


def draw_calls(n: int, contents: int, periods: dict[str, int], gen: torch.Generator) -> list[tuple[int, int]]:
    """(content index, shift) per call: contents in turn, shifts at random (one shift serves
    every input of the call: each input's mask is drawn independently)."""
    top = max([*periods.values(), 1])
    shifts = torch.randint(0, top, (n,), generator=gen).tolist()
    return [(t % contents, int(s)) for t, s in enumerate(shifts)]


def sample_positions(numel: int, n: int, per_call: int, gen: torch.Generator) -> torch.Tensor:
    """Secret positions to check of each call's output: [n, per_call] flat indices."""
    if numel == 0:
        return torch.zeros((n, 0), dtype=torch.int64)
    return torch.randint(0, numel, (n, min(per_call, max(numel, 1))), generator=gen)


def escape_probability(per_call: int, wrong_fraction: float) -> float:
    """The chance that one call whose output is wrong at `wrong_fraction` of its elements
    passes `per_call` sampled elements."""
    return math.pow(1.0 - wrong_fraction, per_call)
