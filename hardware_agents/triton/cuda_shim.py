"""Installed by the Triton harness in its sandboxed child, before the solution is imported.

`install_cuda_shim()` (the interpreter tier only): GPU-minded code runs for real on CPU
tensors. Published FlashInfer-Bench kernels start with `if not torch.cuda.is_available():`
and then either fall back to plain torch (so "correct in the interpreter" would prove
nothing about their Triton code) or raise; they call `.cuda()`, allocate with
`device="cuda"`, assert `x.is_cuda` and `torch.cuda.synchronize()`. Under the shim
`torch.cuda.is_available()` is true, the device queries describe one H100, `.cuda()` and
`device="cuda"` give CPU tensors, `is_cuda` is true and synchronization waits for the
simulated device (`SIM`, below).
`torch.cuda.Event` is left alone: the harness owns the clock.

`count_launches()` (every tier): wraps Triton's JIT launch (`JITFunction.run`, and
`InterpretedFunction.run` under TRITON_INTERPRET) and returns a function giving the number
of kernel launches so far, so the harness can tell a solution that launched no Triton
kernel during a call (a torch fallback) from one that did. It guards against the honest
fallback, not against a kernel that forges the count from inside the same process.

`SIM` (a `SimulatedDevice`) is the interpreter tier's device timeline, the clock of its
timer (`timing.make_timer("simulated")`): CPU work is synchronous and takes host time;
device work queued through the shim (`torch.cuda._sleep(cycles)`, at `SIM_CYCLES_PER_S`,
and the timer's simulated flush) runs back to back on its stream after what was queued
before; events record the time their stream reaches them; a synchronisation waits for
every stream. Streams made with `torch.cuda.Stream()` are timelines of their own, so the
tests can show what a GPU does with work on a side stream, a lead before the begin event, a
clock slowed by code in the kernel's process.
"""

from __future__ import annotations

import functools
import time
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


SIM_CYCLES_PER_S = 1.0e9  # the simulated device's clock, for `torch.cuda._sleep(cycles)`
_now = time.perf_counter  # taken at import, before any solution exists in the process


class SimulatedDevice:
    """A device timeline in host time (see the module doc). Stream 0 is the harness's. `now`
    and `wait` are the host's clock and how to let it pass (tests give a virtual clock)."""

    name = "simulated"

    def __init__(self, now: Callable[[], float] = _now, wait: Callable[[float], None] | None = None) -> None:
        self.free_at: dict[int, float] = {0: 0.0}  # stream -> when its queued work ends
        self.current = 0
        self.flush_s = 0.0  # the simulated device time of the timer's flush
        self.capturing: SimGraph | None = None  # a graph being captured (`SimGraph`)
        self._now = now
        self._wait = wait or _wait_until

    def new_stream(self) -> int:
        sid = len(self.free_at)
        self.free_at[sid] = 0.0
        return sid

    def work(self, seconds: float, stream: int | None = None) -> None:
        """Queue `seconds` of device work on `stream` (default: the current one); recorded
        instead while a graph is captured."""
        if self.capturing is not None:
            self.capturing.ops.append(functools.partial(self.work, seconds, stream))
            return
        sid = self.current if stream is None else stream
        self.free_at[sid] = max(self.free_at[sid], self._now()) + max(seconds, 0.0)

    def queue_flush(self) -> None:
        if self.flush_s:
            self.work(self.flush_s, 0)

    def wait_stream(self, waiter: int, other: int) -> None:
        self.free_at[waiter] = max(self.free_at[waiter], self.free_at[other])

    def event(self) -> list[float]:
        return [0.0]

    def record(self, event: list[float]) -> None:
        event[0] = max(self.free_at[0], self._now())

    def elapsed_ms(self, begin: list[float], end: list[float]) -> float:
        return (end[0] - begin[0]) * 1e3

    def synchronize(self, stream: int | None = None) -> None:
        self._wait(self.free_at[stream] if stream is not None else max(self.free_at.values()))


class SimGraph:
    """A CUDA graph on the simulated device: capturing records the device work queued and the
    Triton launches made (neither runs then, as on a GPU), replaying runs them again in order,
    without the host code around them (the wrapper's Python). Torch ops run when captured: the
    model covers Triton launches and simulated device time, not captured torch kernels."""

    def __init__(self) -> None:
        self.ops: list[Callable[[], Any]] = []

    def replay(self) -> None:
        for op in self.ops:
            op()


def _wait_until(t: float) -> None:
    """Let host time pass until `t`: asleep for the bulk (a shared host's other work runs
    meanwhile), spinning for the last 100 us."""
    left = t - _now()
    if left > 2e-4:
        time.sleep(left - 1e-4)
    while _now() < t:
        pass


SIM = SimulatedDevice()


class _Stream:
    """torch.cuda.Stream / current_stream stand-in: a timeline of the simulated device (CPU
    work on it is synchronous; `torch.cuda._sleep` queues device time on it)."""

    def __init__(self, *args: Any, _sid: int | None = None, **kwargs: Any) -> None:
        self.device = torch.device("cpu")
        self.sid = SIM.new_stream() if _sid is None else _sid
        self.cuda_stream = self.sid
        self._outer: list[int] = []

    def synchronize(self) -> None:
        SIM.synchronize(self.sid)

    def wait_stream(self, other: Any) -> None:
        SIM.wait_stream(self.sid, getattr(other, "sid", 0))

    def query(self) -> bool:
        return SIM.free_at[self.sid] <= _now()

    def __enter__(self) -> _Stream:
        self._outer.append(SIM.current)
        SIM.current = self.sid
        return self

    def __exit__(self, *exc: object) -> None:
        SIM.current = self._outer.pop() if self._outer else 0


def _current_stream(device: Any = None) -> _Stream:
    return _Stream(_sid=SIM.current)


def _stream_context(stream: Any = None) -> Any:
    return stream if isinstance(stream, _Stream) else _Stream(_sid=SIM.current)


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
    cuda.synchronize = lambda device=None: SIM.synchronize()
    cuda._sleep = lambda cycles: SIM.work(cycles / SIM_CYCLES_PER_S)
    cuda.get_device_name = lambda device=None: H100.name
    cuda.get_device_capability = lambda device=None: (H100.major, H100.minor)
    cuda.get_device_properties = lambda device=None: H100  # type: ignore[assignment,return-value]
    cuda.device = _DeviceContext  # type: ignore[assignment,misc]
    cuda.Stream = _Stream  # type: ignore[assignment,misc]
    cuda.current_stream = _current_stream  # type: ignore[assignment]
    cuda.default_stream = lambda device=None: _Stream(_sid=0)  # type: ignore[assignment,return-value]
    cuda.stream = _stream_context
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
                if SIM.capturing is not None:  # a graph of the simulated device records the launch
                    SIM.capturing.ops.append(functools.partial(orig, self, *args, **kwargs))
                    return None
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
