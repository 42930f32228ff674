"""The child side of the toy kernel language (see toy.py): it runs inside the real sandbox
(this folder is on the policy's `python_path`).

A toy kernel is a Python file defining `kernel(x: ndarray) -> ndarray`. The harness runs it
on every correctness case and, when asked to time it, in rounds the agent drives: it stops
itself whenever it waits for the agent (see hardware_agents/pipeline/rounds.py), times
every call with `time.perf_counter` as the kernel's process sees it (a kernel may patch
it: the agent bounds that clock by its own), and keeps each round's last output for the
agent to check.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable
from pathlib import Path

import msgspec
import numpy as np


class ToyCompileError(Exception):
    """The kernel's source does not load."""


class ToyTiming(msgspec.Struct, frozen=True, kw_only=True):
    rounds: int
    calls: int  # per round, every one timed
    calibration: int
    inputs_dir: str  # round k's input arrives as round-<k>.npy, handed over by the agent


class ToyRequest(msgspec.Struct, frozen=True, kw_only=True):
    kernel_file: str
    cases: list[str]  # case-<name>.npy in the work dir
    timing: ToyTiming | None = None


class ToyResult(msgspec.Struct, kw_only=True):
    rounds_s: list[float] = []  # the kernel's process's reading of each round's calls


def _stop() -> None:
    os.kill(os.getpid(), signal.SIGSTOP)


def _timed_calls(
    fn: Callable[[np.ndarray], np.ndarray], x: np.ndarray, calls: int
) -> tuple[float, np.ndarray]:
    total, y = 0.0, x
    for _ in range(calls):
        t0 = time.perf_counter()  # looked up at every call: the kernel may have replaced it
        y = fn(x)
        total += time.perf_counter() - t0
    return total, y


def _null(x: np.ndarray) -> np.ndarray:
    return x


def run(payload: bytes, workdir: Path) -> ToyResult:
    req = msgspec.msgpack.decode(payload, type=ToyRequest)
    timing = req.timing
    res = ToyResult()
    if timing is not None:
        _stop()  # ready to calibrate
        dummy = np.load(workdir / f"case-{req.cases[0]}.npy")
        for _ in range(timing.calibration):
            x = dummy.copy()
            _stop()  # set up
            _timed_calls(_null, x, timing.calls)
            _stop()
    source = Path(req.kernel_file).read_text()
    try:
        code = compile(source, "kernel.py", "exec")
    except SyntaxError as e:
        raise ToyCompileError(f"the kernel does not compile: {e}") from None
    namespace: dict[str, object] = {}
    exec(code, namespace)  # the untrusted kernel, in its sandbox
    kernel = namespace.get("kernel")
    if not callable(kernel):
        raise ToyCompileError("the kernel file defines no function `kernel`")
    for name in req.cases:
        x = np.load(workdir / f"case-{name}.npy")
        np.save(workdir / f"out-{name}.npy", kernel(x))
        np.save(workdir / f"in-{name}.npy", x)  # as the call left it: the agent compares it with its own
    if timing is None:
        return res
    inputs = Path(timing.inputs_dir)
    _stop()  # waiting for round 0's input
    for k in range(timing.rounds):
        x = np.load(inputs / f"round-{k}.npy")
        _stop()  # ready to be timed
        total, y = _timed_calls(kernel, x, timing.calls)
        np.save(workdir / f"round-{k}.npy", y)
        res.rounds_s.append(total)
        _stop()  # round k is over (waiting for the next round's input)
    return res
