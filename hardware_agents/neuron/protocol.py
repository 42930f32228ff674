"""Records that cross the sandbox boundary between the Neuron agent and its harness.

Everything the harness returns was produced in a process that ran the untrusted kernel, so
it is data the agent checks (outputs are judged in the parent against its own reference;
latencies are re-derived from the profiler files by a separate child that loads no kernel
code), never a verdict.
"""

from __future__ import annotations

from typing import Literal

import msgspec

Mode = Literal["device", "simulate"]
Phase = Literal["load", "compile", "run"]


class KernelArg(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """One positional kernel argument: an array (.npy path) or a Python scalar."""

    path: str = ""
    scalar: float | int | bool | None = None


class CaseSpec(msgspec.Struct, frozen=True, kw_only=True):
    name: str
    args: list[KernelArg]


class TimingSpec(msgspec.Struct, frozen=True, kw_only=True):
    """The paper's timing: `warmup` runs, then `runs` profiled runs, repeated while
    (max - min) / min > `spread_threshold`, at most `max_rounds` rounds."""

    args: list[KernelArg]  # the timed inputs (the last correctness seed's, as in the paper)
    warmup: int = 2
    runs: int = 10
    max_rounds: int = 10
    spread_threshold: float = 0.01
    pause_s: float = 1.0  # between rounds, as the paper sleeps before re-measuring


class HarnessRequest(msgspec.Struct, frozen=True, kw_only=True):
    mode: Mode
    kernel_file: str  # absolute path of the staged kernel module
    entry: str
    cases: list[CaseSpec]
    compile_options: str = ""  # additional_compile_opt of nki.baremetal
    timing: TimingSpec | None = None
    neuron_profile: str = ""  # executable, for the timing loop's spread decisions


class ErrorInfo(msgspec.Struct, kw_only=True):
    phase: Phase
    type: str
    message: str
    traceback: str = ""
    case: str = ""


class CaseRun(msgspec.Struct, kw_only=True):
    name: str
    outputs: list[str] = []  # .npy paths relative to the work dir, in return order
    returned_tuple: bool = False
    mutated: list[int] = []  # positions of array arguments the kernel modified
    wall_s: float = 0.0


class TimedRun(msgspec.Struct, kw_only=True):
    neff: str  # relative paths of the run's NEFF and NTFF
    ntff: str
    total_time_s: float | None = None  # the harness's own reading (decides re-runs only)


class TimingRound(msgspec.Struct, kw_only=True):
    runs: list[TimedRun] = []
    outputs: list[str] = []  # the last profiled run's outputs (.npy, relative), judged by the agent
    returned_tuple: bool = False


class HarnessResult(msgspec.Struct, kw_only=True):
    cases: list[CaseRun] = []
    error: ErrorInfo | None = None
    rounds: list[TimingRound] = []
    timing_error: str = ""
    versions: dict[str, str] = {}
    compile_s: float = 0.0


class SummaryRequest(msgspec.Struct, frozen=True, kw_only=True):
    neuron_profile: str
    pairs: list[tuple[str, str]]  # (neff, ntff) relative to the work dir
    timeout_s: float = 120.0


class SummaryResult(msgspec.Struct, kw_only=True):
    texts: list[str] = []  # raw summary-json per pair ("" when the tool failed)
    errors: list[str] = []


__all__ = ["CaseRun", "CaseSpec", "ErrorInfo", "HarnessRequest", "HarnessResult", "KernelArg", "Mode", "Phase",
           "SummaryRequest", "SummaryResult", "TimedRun", "TimingRound", "TimingSpec"]
