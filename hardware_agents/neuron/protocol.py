"""Records that cross the sandbox boundary between the Neuron agent and its harness.

Everything the harness returns was produced in a process that ran the untrusted kernel, so
it is data the agent checks (outputs are judged in the parent against its own reference;
latencies are re-derived from the profiler files by a separate child that loads no kernel
code, and bounded by the parent's own clock), never a verdict.

The timing handshake (the agent drives it; see `hardware_agents.neuron.agent`): the timing
child stops itself (SIGSTOP) when it waits for round k; the agent writes the round's
argument files and `round_file(k)` (a msgpack `list[KernelArg]`) into `TimingSpec.inputs_dir`
(the agent's own directory, which the child may read but not write) and continues it; the
child removes the previous round's files, loads the arguments and stops again (ready); the
agent starts its clock and continues it; the child runs `warmup` + `runs` calls, writes
`report_file(k)` (a `TimingRound`) and stops: the agent's clock stops there. With no
`round_file(k)` when it is continued, the child ends.
"""

from __future__ import annotations

import traceback
from typing import Literal

import msgspec

Mode = Literal["device", "simulate", "emulate"]
Phase = Literal["load", "compile", "run"]


class KernelArg(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """One positional kernel argument: an array (.npy path) or a Python scalar."""

    path: str = ""
    scalar: float | int | bool | None = None


class CaseSpec(msgspec.Struct, frozen=True, kw_only=True):
    name: str
    args: list[KernelArg]


class TimingSpec(msgspec.Struct, frozen=True, kw_only=True):
    """One timing round: `warmup` unsaved runs, then `runs` profiled runs (NEFF + NTFF each).
    How many rounds, on which inputs, is the agent's decision (see the module doc)."""

    inputs_dir: str  # absolute: where the agent puts each round's arguments
    warmup: int = 2
    runs: int = 10


def round_file(k: int) -> str:
    """Round k's arguments (msgpack list[KernelArg]), relative to `TimingSpec.inputs_dir`."""
    return f"round{k}.msgpack"


def round_dir(k: int) -> str:
    """Where the agent writes round k's argument files (relative to `TimingSpec.inputs_dir`)."""
    return f"r{k}"


def report_file(k: int) -> str:
    """The child's report of round k (a msgpack TimingRound), relative to the work dir."""
    return f"report{k}.msgpack"


def timed_output(k: int, i: int, j: int) -> str:
    """Output j of profiled run i of round k (.npy, relative to the work dir)."""
    return f"out/timed-r{k}-{i}-{j}.npy"


def profiled_pair(k: int, i: int) -> tuple[str, str]:
    """(NEFF, NTFF) of profiled run i of round k, relative to the work dir."""
    return f"art/r{k}_{i}.neff", f"art/r{k}_{i}.ntff"


class HarnessRequest(msgspec.Struct, frozen=True, kw_only=True):
    mode: Mode
    kernel_file: str  # absolute path of the staged kernel module
    entry: str
    cases: list[CaseSpec]
    compile_options: str = ""  # additional_compile_opt of nki.baremetal
    timing: TimingSpec | None = None
    neuron_profile: str = ""  # when set, the child reads each profiled run too (verify_summaries=False)


class ErrorInfo(msgspec.Struct, kw_only=True):
    phase: Phase
    type: str
    message: str
    traceback: str = ""
    case: str = ""

    @classmethod
    def of(cls, phase: Phase, e: BaseException, case: str = "") -> ErrorInfo:
        """The exception being handled, bounded for the wire (call it inside `except`)."""
        return cls(
            phase=phase,
            type=type(e).__name__,
            message=str(e)[:20000],
            traceback=traceback.format_exc(limit=30)[-20000:],
            case=case,
        )


class CaseRun(msgspec.Struct, kw_only=True):
    name: str
    outputs: list[str] = []  # .npy paths relative to the work dir, in return order
    returned_tuple: bool = False
    mutated: list[int] = []  # positions of array arguments the kernel modified
    wall_s: float = 0.0


class TimedRun(msgspec.Struct, kw_only=True):
    outputs: int = 0  # how many outputs it saved (`timed_output` names them)
    returned_tuple: bool = False
    total_time_s: float | None = None  # the harness's own reading (believed only with verify_summaries=False)


class TimingRound(msgspec.Struct, kw_only=True):
    """The child's report of one round (its profiled runs in order; paths by `profiled_pair`)."""

    runs: list[TimedRun] = []
    mutated: list[int] = []  # positions of array arguments a timed call modified


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


__all__ = [
    "CaseRun",
    "CaseSpec",
    "ErrorInfo",
    "HarnessRequest",
    "HarnessResult",
    "KernelArg",
    "Mode",
    "Phase",
    "SummaryRequest",
    "SummaryResult",
    "TimedRun",
    "TimingRound",
    "TimingSpec",
    "profiled_pair",
    "report_file",
    "round_dir",
    "round_file",
    "timed_output",
]
