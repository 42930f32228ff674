"""Records that cross the parent/child boundary of the Triton agent (msgpack-encoded).

The parent (agent) stages a solution and per-case input files in the sandbox, sends a
`HarnessRequest`, and reads back a `HarnessResult` plus the output files the child saved.
Nothing in the result is trusted as a verdict: the parent re-reads and judges the outputs.
"""

from __future__ import annotations

from typing import Literal

import msgspec

# The Triton family's reason codes (`Profile.reason`): what its generic statuses do not say.
# `incorrect` with NO_TRITON_LAUNCH: a Triton solution whose check calls launched no Triton
# kernel (e.g. a torch fallback taken because it thought no GPU was there): its outputs, right
# or not, prove nothing about its kernels.
NO_TRITON_LAUNCH = "no_triton_launch"

TimerName = Literal["cuda_event", "simulated"]


class TensorMeta(msgspec.Struct, kw_only=True, frozen=True):
    name: str
    dtype: str  # FlashInfer dtype name ("bfloat16", "int32", ...)
    shape: list[int] | None = None  # None: a Python scalar


class BufferSlot(msgspec.Struct, frozen=True, kw_only=True):
    """One tensor of a judge-owned region (`judge_buffers.py`): `offset` bytes from its start,
    `guard` bytes of poison on each side (0: none)."""

    name: str
    dtype: str  # a TORCH_DTYPES name
    shape: list[int]
    offset: int
    guard: int = 0


class CudaIpc(msgspec.Struct, frozen=True, kw_only=True):
    """A CUDA allocation of the judge's as the child opens it: the allocation's IPC handle
    (`cudaIpcMemHandle_t`, 64 bytes) and the region's offset in it."""

    handle: bytes
    offset: int
    device: int = 0  # the child's device index (it sees one GPU: CUDA_VISIBLE_DEVICES)


class BufferHandle(msgspec.Struct, frozen=True, kw_only=True):
    """What the child is told of the judge's region (`judge_buffers.py`): how to map it and
    where each slot is."""

    kind: Literal["shared_memory", "cuda_ipc"]
    size: int
    slots: list[BufferSlot]
    fd: int = -1  # shared_memory: the memfd, inherited under this number
    ipc: CudaIpc | None = None


def case_slot(case: str, role: str, name: str) -> str:
    """The judge's region's slot of a correctness case's input (`role` "in") or output ("out")."""
    return f"case/{case}/{role}/{name}"


def timed_slot(t: int, name: str) -> str:
    """The judge's region's slot of output `name` of kept timed call t (graph replays follow
    the calls)."""
    return f"timed/{t}/{name}"


class CaseSpec(msgspec.Struct, kw_only=True, frozen=True):
    """One input set: a seed or an adversarial case of one workload."""

    name: str
    inputs_file: str  # torch.save'd dict name -> CPU tensor (read-only data dir)
    scalars: dict[str, float | int | bool] = {}
    outputs: list[TensorMeta] = []  # shapes of this case's workload


class TimingSpec(msgspec.Struct, kw_only=True, frozen=True):
    """How the child times the entry point on one workload, in `trials` rounds.

    Before the solution is imported, `calibration_rounds` rounds of the same loop call a
    null entry point on buffers of the same geometry, set up from a round file of the same
    size (`calibration_file(k)`, zeros): the parent's wall time of those is the untimed work
    per call on this host, and of their set-ups the set-up's (see
    `triton.rounds_judge.timing_clock_mismatch`).

    Each timing round's inputs are fresh: `per_round` base contents and a mask per float
    input (`round_file(k)`, see `timed_inputs`), handed over only when the child has stopped
    itself after the correctness phase or the previous round. Every call t of a round gets
    its own content (base x rotated mask). The contents go through `rotation` buffer sets;
    before every call the L2 is flushed by writing `flush_bytes`; a round runs `warmup` then
    `reps` calls, every one timed (the warm-ups count toward the parent's wall-clock bound
    only) and followed by a device synchronisation (`timing.py`: the parent's clock sees each
    call alone). With `rotation` >= the calls every call has a buffer set of its own, stocked
    before the clock starts. With `keep_outputs` every call writes a fresh output buffer that
    is kept until the round ends; the parent then names (`checks_file(k)`) the secret
    positions of each call's outputs and the calls to send back in full. Without it (outputs
    too large to keep them all), the positions come in the round file and the last call is
    sent in full. Timer readings are collected at the end of the round and written to
    `readings_file(k)` before the child stops (the parent reads them while it is stopped).

    Rounds: the parent hands over round k's file, or `END_FILE` when it wants no more; after
    `trials` rounds it may hand over up to `extra_rounds` more (a round its clock bound
    rejected is not counted and is followed by another, in the same child).
    """

    like: str
    per_round: int
    rotation: int
    timer: TimerName = "cuda_event"
    warmup: int = 10
    reps: int = 50
    trials: int = 3
    extra_rounds: int = 0
    # after its eager calls a round replays every call as a graph captured in its set-up (the
    # device figure, `timing.py`); only where every call has a buffer set and kept outputs
    graphs: bool = False
    capture_budget_s: float = 200e-6  # host time a call's capture may take (else eager only)
    flush_bytes: int = 256 << 20
    calibration_rounds: int = 2
    keep_outputs: bool = True
    mutation_samples: int = 256  # input elements compared with what was handed over, per call
    device_flush_s: float = 0.0  # the `simulated` timer's flush on its simulated device (tests)
    # a directory of the parent's that the child may read, not write, holding `round_file(k)`
    # (so the kernel cannot plant a link where the parent writes); empty: the work dir
    inputs_dir: str = ""

    @property
    def calls(self) -> int:
        return self.warmup + self.reps


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
    # the interpreter holds bf16 tiles in fp32 (`bf16_upcast`): the agent's re-run of a bf16
    # kernel found incorrect, to tell the interpreter's bf16 arithmetic from the kernel's fault
    upcast_bf16: bool = False
    # the judge's region (`judge_buffers.py`): the cases' inputs and outputs and the kept timed
    # outputs live there, written and read by the judge (None: the child allocates its own
    # buffers and hands outputs over in files)
    buffers: BufferHandle | None = None


class CaseRun(msgspec.Struct, kw_only=True):
    name: str
    output_file: str = ""  # relative to the work dir; dict name -> tensor
    mutated: list[str] = []  # inputs whose bytes changed (incl. their guard zones)
    overflow: list[str] = []  # outputs whose guard zones were written
    error: str = ""  # an exception in this case
    error_type: str = ""
    call_ms: float = 0.0
    launches: int = -1  # Triton kernel launches during the call (-1: not counted)
    returned: str = ""  # what the entry point returned: "none", "tensor", "tuple of N", or a type name
    # with the judge's region, a value-returning entry point's outputs as returned (dtype and
    # shape), copied into the judge's slots where they are the definition's
    outputs: list[TensorMeta] = []


class TimingRun(msgspec.Struct, kw_only=True):
    samples_ms: list[float]
    median_ms: float
    warmup_ms: list[float] = []  # the round's warm-up calls, timed by the same timer
    mutated: int = 0  # calls after which sampled input elements differed from what was handed over
    malformed: int = 0  # calls of a value-returning entry point that returned the wrong kind of values
    # the same calls replayed as graphs captured in the set-up (the device figure; empty: not
    # captured, `graph_note` says why)
    graph_samples_ms: list[float] = []
    graph_warmup_ms: list[float] = []
    graph_note: str = ""


# The harness's error type when a round's inputs are not there yet: its process ran while
# the agent held it stopped (something continued it before the agent had handed them over).
RAN_AHEAD = "RanAheadOfItsInputs"


def round_file(k: int) -> str:
    """Where the parent puts the inputs of timing round k (relative to `TimingSpec.inputs_dir`)."""
    return f"timing/round-{k}.pt"


def checks_file(k: int) -> str:
    """Where the parent names, once round k is over, what of its outputs the child sends back."""
    return f"timing/checks-{k}.pt"


def calibration_file(k: int) -> str:
    """Where the parent puts calibration round k's inputs: zeros of a round file's size."""
    return f"timing/calibration-{k}.pt"


# The parent hands over no more rounds (relative to `TimingSpec.inputs_dir`).
END_FILE = "timing/end"
MAX_READINGS_BYTES = 1 << 20


def readings_file(k: int) -> str:
    """Where the child writes timing round k's readings (a `TimingRun`) before it stops."""
    return f"out/timing-{k}.msgpack"


class ConfigRun(msgspec.Struct, kw_only=True):
    """One correctness case run again with config `index` of every `triton.autotune` kernel
    (interpreter only; see `autotune.py`)."""

    index: int
    configs: dict[str, str]  # kernel -> the config it launched
    run: CaseRun


# Where the harness leaves its correctness report before it stops for round 0's inputs: the
# agent reads and judges it while the child is held stopped, before any timing round runs.
CORRECTNESS_REPORT = "out/correctness.msgpack"
MAX_REPORT_BYTES = 64 << 20


class CorrectnessReport(msgspec.Struct, kw_only=True):
    """What the harness ran of the correctness cases (the same fields as its final result)."""

    cases: list[CaseRun]
    autotune: dict[str, str] = {}
    config_runs: list[ConfigRun] = []


class HarnessResult(msgspec.Struct, kw_only=True):
    cases: list[CaseRun]
    timing: list[TimingRun] = []
    calibration: list[TimingRun] = []  # the null entry point's rounds (before the solution was imported)
    timed_samples: dict[int, str] = {}  # round -> file: output name -> [calls, positions] values
    timed_full: dict[str, str] = {}  # "<round>-<call>" -> file with that call's outputs
    timer: str = ""
    skipped_timing: str = ""
    device_name: str = ""
    phase_s: dict[str, float] = {}
    versions: dict[str, str] = {}
    autotune: dict[str, str] = {}  # kernel -> the config the correctness cases launched (interpreter)
    config_runs: list[ConfigRun] = []  # the other configs of autotuned kernels, at the sweep cases
