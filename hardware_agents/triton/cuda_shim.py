"""Installed by the Triton harness in its sandboxed child, before the solution is imported.

`install_cuda_shim()` (the interpreter tier only): GPU-minded code runs for real on CPU
tensors. Published FlashInfer-Bench kernels start with `if not torch.cuda.is_available():`
and then either fall back to plain torch (so "correct in the interpreter" would prove
nothing about their Triton code) or raise; they call `.cuda()`, allocate with
`device="cuda"`, assert `x.is_cuda` and `torch.cuda.synchronize()`. Under the shim
`torch.cuda.is_available()` is true, the device queries describe one H100, `.cuda()` and
`device="cuda"` give CPU tensors, `is_cuda` is true and synchronization is a no-op.
`torch.cuda.Event` is left alone: the harness owns the clock.

`count_launches()` (every tier): wraps Triton's JIT launch (`JITFunction.run`, and
`InterpretedFunction.run` under TRITON_INTERPRET) and returns a function giving the number
of kernel launches so far, so the harness can tell a solution that launched no Triton
kernel during a call (a torch fallback) from one that did. It guards against the honest
fallback, not against a kernel that forges the count from inside the same process.
"""

from __future__ import annotations

import functools
import types
from collections.abc import Callable
from typing import Any

import torch

_FACTORIES = (
    "empty",
    "zeros",
    "ones",
    "full",
    "rand",
    "randn",
    "randint",
    "arange",
    "tensor",
    "as_tensor",
    "empty_like",
    "zeros_like",
    "ones_like",
    "full_like",
    "rand_like",
    "randn_like",
    "randint_like",
    "empty_strided",
    "linspace",
    "eye",
)
_TENSOR_NEW = ("new_empty", "new_zeros", "new_ones", "new_full", "new_tensor")
H100 = types.SimpleNamespace(
    name="NVIDIA H100 80GB HBM3 (Triton interpreter)",
    major=9,
    minor=0,
    multi_processor_count=132,
    total_memory=80 << 30,
    L2_cache_size=50 << 20,
    warp_size=32,
    max_shared_memory_per_block_optin=227 << 10,
)


def _cpu(device: Any) -> Any:
    """`device` with CUDA mapped to the CPU (strings, indices and torch.device)."""
    if isinstance(device, int) and not isinstance(device, bool):
        return torch.device("cpu")
    if isinstance(device, str) and device.split(":", 1)[0] == "cuda":
        return torch.device("cpu")
    if isinstance(device, torch.device) and device.type == "cuda":
        return torch.device("cpu")
    return device


def _with_cpu_device(fn: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        if "device" in kwargs:
            kwargs["device"] = _cpu(kwargs["device"])
        return fn(*args, **kwargs)

    return wrapper


def _to(orig: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(orig)
    def to(self: torch.Tensor, *args: Any, **kwargs: Any) -> Any:
        args = tuple(_cpu(a) if isinstance(a, str | torch.device) else a for a in args)
        if "device" in kwargs:
            kwargs["device"] = _cpu(kwargs["device"])
        return orig(self, *args, **kwargs)

    return to


class _Stream:
    """torch.cuda.Stream / current_stream stand-in: work on CPU tensors is already done."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.device = torch.device("cpu")
        self.cuda_stream = 0

    def synchronize(self) -> None:
        pass

    def wait_stream(self, other: Any) -> None:
        pass

    def query(self) -> bool:
        return True

    def __enter__(self) -> _Stream:
        return self

    def __exit__(self, *exc: object) -> None:
        pass


class _DeviceContext:
    def __init__(self, device: Any = None) -> None:
        self.idx = 0

    def __enter__(self) -> _DeviceContext:
        return self

    def __exit__(self, *exc: object) -> None:
        pass


def install_cuda_shim() -> None:
    """Make the CUDA API answer as one GPU whose tensors are CPU tensors (see the module doc)."""
    cuda = torch.cuda
    cuda.is_available = lambda: True
    cuda.is_initialized = lambda: True
    cuda.init = lambda: None
    cuda.device_count = lambda: 1
    cuda.current_device = lambda: 0
    cuda.set_device = lambda device: None
    cuda.synchronize = lambda device=None: None
    cuda.get_device_name = lambda device=None: H100.name
    cuda.get_device_capability = lambda device=None: (H100.major, H100.minor)
    cuda.get_device_properties = lambda device=None: H100  # type: ignore[assignment,return-value]
    cuda.device = _DeviceContext  # type: ignore[assignment,misc]
    cuda.Stream = _Stream  # type: ignore[assignment,misc]
    cuda.current_stream = lambda device=None: _Stream()  # type: ignore[assignment,return-value]
    cuda.default_stream = lambda device=None: _Stream()  # type: ignore[assignment,return-value]
    cuda.stream = lambda stream=None: _Stream()  # type: ignore[assignment,misc]
    cuda.empty_cache = lambda: None
    for name in _FACTORIES:
        setattr(torch, name, _with_cpu_device(getattr(torch, name)))
    t = torch.Tensor
    for name in _TENSOR_NEW:
        setattr(t, name, _with_cpu_device(getattr(t, name)))
    t.cuda = lambda self, *a, **k: self  # type: ignore[method-assign]
    t.to = _to(t.to)  # type: ignore[method-assign]
    t.is_cuda = property(lambda self: True)  # type: ignore[assignment]


def count_launches() -> Callable[[], int]:
    """Count Triton kernel launches from now on; returns the counter's reader."""
    count = [0]

    def wrap(cls: Any) -> None:  # a Triton function class whose `run` launches
        orig = cls.run

        @functools.wraps(orig)
        def run(self: Any, *args: Any, **kwargs: Any) -> Any:
            if not kwargs.get("warmup", False):
                count[0] += 1
            return orig(self, *args, **kwargs)

        cls.run = run

    from triton.runtime.jit import JITFunction

    wrap(JITFunction)
    try:
        from triton.runtime.interpreter import InterpretedFunction
    except ImportError:  # pragma: no cover - older Triton
        pass
    else:
        wrap(InterpretedFunction)
    return lambda: count[0]
