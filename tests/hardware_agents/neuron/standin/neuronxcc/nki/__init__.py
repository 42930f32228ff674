"""STAND-IN `neuronxcc.nki` for AccelOpt's tests: NOT the AWS NKI (see ../../README.md).

Provides `jit`, `baremetal`, `simulate_kernel` and the `language`/`isa`/`typing` submodules
with the small API surface the agent and the test kernels use.
"""

from __future__ import annotations

from typing import Any

from neuronxcc.nki import _emulator, isa, language, typing
from neuronxcc.nki._emulator import CompilationError


class _Kernel:
    def __init__(self, fn: Any) -> None:
        self.func = fn
        self.__name__ = getattr(fn, "__name__", "kernel")

    def __call__(self, *args: Any) -> Any:
        return _emulator.simulate(self.func, args)


def _unwrap(kernel: Any) -> Any:
    return getattr(kernel, "func", kernel)


def jit(fn: Any = None, **_: Any) -> Any:
    if fn is None:
        return lambda f: _Kernel(f)
    return _Kernel(fn)


def baremetal(kernel: Any = None, **opts: Any) -> Any:
    if kernel is None:
        return lambda k: baremetal(k, **opts)

    def run(*args: Any) -> Any:
        return _emulator.baremetal_run(_unwrap(kernel), args, **opts)

    return run


def simulate_kernel(kernel: Any, *args: Any, **kwargs: Any) -> Any:
    return _emulator.simulate(_unwrap(kernel), args)


def benchmark(*_: Any, **__: Any) -> Any:
    raise NotImplementedError("the stand-in has no nki.benchmark")


__all__ = [
    "CompilationError",
    "baremetal",
    "benchmark",
    "isa",
    "jit",
    "language",
    "simulate_kernel",
    "typing",
]
