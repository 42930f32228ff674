"""Records that cross the parent/child boundary of the Triton agent (msgpack-encoded).

The parent (agent) stages a solution and per-case input files in the sandbox, sends a
`HarnessRequest`, and reads back a `HarnessResult` plus the output files the child saved.
Nothing in the result is trusted as a verdict: the parent re-reads and judges the outputs.
"""

from __future__ import annotations

from typing import Literal

import msgspec

TimerName = Literal["cuda_event", "do_bench", "perf_counter"]


class TensorMeta(msgspec.Struct, kw_only=True, frozen=True):
    name: str
    dtype: str  # FlashInfer dtype name ("bfloat16", "int32", ...)
    shape: list[int] | None = None  # None: a Python scalar


class CaseSpec(msgspec.Struct, kw_only=True, frozen=True):
    """One input set: a seed or an adversarial case of one workload."""

    name: str
    inputs_file: str  # torch.save'd dict name -> CPU tensor (read-only data dir)
    scalars: dict[str, float | int | bool] = {}
    outputs: list[TensorMeta] = []  # shapes of this case's workload


class TimingSpec(msgspec.Struct, kw_only=True, frozen=True):
    """How the child times the entry point on one workload, in `trials` rounds.

    Each round's inputs are fresh: `per_round` contents the parent hands over
    (`round_file(k)`, a dict content name -> input tensors) only when the child has stopped
    itself after the correctness phase or the previous round, so the kernel is loaded before
    they exist in its reach. `like` is the correctness case whose scalars and output shapes
    they share. The contents rotate through `rotation` buffer sets (not a multiple of
    `per_round`, so contents move between buffers); before every call the L2 is flushed by
    writing `flush_bytes`; a round runs `warmup` then `reps` calls, every one timed (the
    warm-up times only count toward the parent's wall-clock bound); the latency is the mean
    over rounds of the median over reps.
    """

    like: str
    per_round: int
    rotation: int
    timer: TimerName = "cuda_event"
    warmup: int = 10
    reps: int = 50
    trials: int = 3
    flush_bytes: int = 256 << 20
    spot_checks: int = 64
    atol: float = 1e-2
    rtol: float = 1e-2
    # a directory of the parent's that the child may read, not write, holding `round_file(k)`
    # (so the kernel cannot plant a link where the parent writes); empty: the work dir
    inputs_dir: str = ""


class HarnessRequest(msgspec.Struct, kw_only=True, frozen=True):
    module_dir: str = ""  # holds the package `accelopt_solution` (default: the work dir)
    entry_file: str
    entry_symbol: str
    destination_passing: bool
    inputs: list[TensorMeta]  # definition order (shapes of the first case)
    cases: list[CaseSpec]
    device: Literal["cpu", "cuda"] = "cpu"
    timing_case_workload: str = ""  # informational
    timing: TimingSpec | None = None
    seed: int = 0


class CaseRun(msgspec.Struct, kw_only=True):
    name: str
    output_file: str = ""  # relative to the work dir; dict name -> tensor
    mutated: list[str] = []  # inputs whose bytes changed (incl. their guard zones)
    overflow: list[str] = []  # outputs whose guard zones were written
    error: str = ""  # an exception in this case
    error_type: str = ""
    call_ms: float = 0.0
    launches: int = -1  # Triton kernel launches during the call (-1: not counted)


class TimingRun(msgspec.Struct, kw_only=True):
    samples_ms: list[float]
    median_ms: float
    inconsistent: int = 0  # timed calls whose output differed from the content's first output
    warmup_ms: list[float] = []  # the round's warm-up calls, timed by the same timer
    mutated: int = 0  # calls after which the inputs differed from what was handed over


def round_file(k: int) -> str:
    """Where the parent puts the inputs of timing round k (relative to `TimingSpec.inputs_dir`)."""
    return f"timing/round-{k}.pt"


class HarnessResult(msgspec.Struct, kw_only=True):
    cases: list[CaseRun]
    timing: list[TimingRun] = []
    timed_outputs: dict[str, str] = {}  # content -> file with the output of its last timed call (every round)
    timer: str = ""
    skipped_timing: str = ""
    device_name: str = ""
    footprint_bytes: int = 0
    phase_s: dict[str, float] = {}
    versions: dict[str, str] = {}
