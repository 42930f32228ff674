"""What crosses the MCP boundary: each tool's arguments and structured result as msgspec
Structs. A tool's JSON schemas are derived from them (`tool_schema`), and its arguments are
decoded with them (`decode_args`), so the schema an agent reads and the check it meets are
one fact. Arguments are strict (an unknown key is an error) and bounded (a kernel's source
at most `MAX_SOURCE_CHARS`, texts and lists short)."""

from __future__ import annotations

from typing import Annotated, Any, Literal, TypeVar

import msgspec

from accelopt.profile import Profile
from accelopt.records import MemoryEntry

MAX_SOURCE_CHARS = 1 << 20  # what a hardware agent compiles at most (hardware_agents.base.MAX_SOURCE_BYTES)
Name = Annotated[str, msgspec.Meta(min_length=1, max_length=200)]
Source = Annotated[str, msgspec.Meta(min_length=1, max_length=MAX_SOURCE_CHARS)]
Text = Annotated[str, msgspec.Meta(min_length=1, max_length=8000)]
ShortText = Annotated[str, msgspec.Meta(max_length=2000)]
# a run's, an agent session's or a campaign's id under the server's root: a name, never a path
RunId = Annotated[str, msgspec.Meta(pattern=r"^[A-Za-z0-9_-]{1,128}$")]
Preset = Literal["quick", "triton", "nki"]
Usd = Annotated[float, msgspec.Meta(ge=0, le=1000)]


class _Args(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    pass


class _Result(msgspec.Struct, kw_only=True, omit_defaults=True):
    pass


# --- problems ---------------------------------------------------------------------------------


class ListProblemsArgs(_Args, kw_only=True):
    """Problems of the installed suites, filtered (all filters optional, each 'equals')."""

    suite: Name | None = None
    device: Name | None = None
    family: Name | None = None  # the device family: cpu, triton, neuron, sim
    op_type: Name | None = None


class ProblemRow(_Result, kw_only=True):
    ref: str  # SUITE/PROBLEM, what every other tool takes
    suite: str
    problem: str
    op_type: str
    device: str
    family: str
    language: str
    axes: dict[str, int] = {}


class ListProblemsResult(_Result, kw_only=True):
    problems: list[ProblemRow]


class GetProblemArgs(_Args, kw_only=True):
    problem: Name  # SUITE/PROBLEM
    device: Name | None = None  # default: the suite's device
    baseline_profile: bool = False  # profile the baseline now (once per server) for its figure


class TensorRow(_Result, kw_only=True):
    name: str
    shape: list[int] | None
    dtype: str


class RooflineFacts(_Result, kw_only=True):
    flops_matmul: float
    flops_vector: float
    bytes_min: float
    device_name: str
    peak_bw_bytes_s: float
    peak_matmul_flops: float
    peak_vector_flops: float
    spec_source: str
    spec_measured: bool
    t_peak_ms: float  # the roofline time at this problem's shapes
    bound: str


class ProblemDetail(_Result, kw_only=True):
    ref: str
    device: str
    language: str
    op_type: str
    description: str = ""
    axes: dict[str, int]
    inputs: list[TensorRow]
    outputs: list[TensorRow]
    tolerance: dict[str, float]
    reference: str
    numpy_reference: str = ""
    constraints: list[str] = []
    check_workloads: list[dict[str, int]] = []
    entry_point: str
    baseline_source: str
    baseline_kernel_id: str
    interface: list[str]
    correctness_bar: str
    problem_section: str  # what AccelOpt's own planner reads of the problem
    primer: str  # the language's and device's primer, with the profile glossary
    roofline: RooflineFacts | None = None
    roofline_note: str = ""
    baseline: JudgedKernel | None = None  # with baseline_profile: the baseline's profile here


# --- judging ---------------------------------------------------------------------------------


class ProfileArgs(_Args, kw_only=True):
    problem: Name
    source: Source  # the whole kernel file, in the suite's language
    device: Name | None = None
    language: Name | None = None  # default: the suite's
    timeout_s: Annotated[float, msgspec.Meta(gt=0, le=600)] | None = None  # the kernel run's limit


class JudgedKernel(_Result, kw_only=True):
    """One verdict of this server's judge."""

    kernel_id: str  # the content id (problem, language, source), as in every run
    problem: str
    device: str
    language: str
    status: str
    latency_ms: float | None = None
    estimated_ms: float | None = None
    pct_peak: float | None = None  # percent of the roofline (100 = on it)
    seeds: list[int] = []  # the correctness seeds the judge drew
    profile: Profile  # the same record a run's profiler publishes
    event_id: str = ""  # the session-log event that holds this verdict


class CompareArgs(_Args, kw_only=True):
    problem: Name
    slow_source: Source
    fast_source: Source
    device: Name | None = None
    language: Name | None = None
    rounds: Annotated[int, msgspec.Meta(ge=1, le=9)] = 3


class CompareSide(_Result, kw_only=True):
    kernel_id: str
    status: str
    rounds_ms: list[float] = []
    median_ms: float | None = None
    log_head: str = ""


class CompareResult(_Result, kw_only=True):
    problem: str
    device: str
    rounds: int
    seeds: list[list[int]]
    slow: CompareSide
    fast: CompareSide
    speedup: float | None = None  # slow median / fast median, both measured here, interleaved
    verified: bool  # both passed every round and fast is faster: record_insight may take this pair
    pair_id: str = ""  # what record_insight names
    event_id: str = ""


class RecordInsightArgs(_Args, kw_only=True):
    pair_id: Name  # from compare_kernels, verified
    title: Annotated[str, msgspec.Meta(min_length=1, max_length=200)]
    text: Text


class RecordInsightResult(_Result, kw_only=True):
    entry_id: str
    memory: str
    written: bool  # False where the entry was there already
    entry: MemoryEntry
    event_id: str = ""


# --- memory ----------------------------------------------------------------------------------


class SearchMemoryArgs(_Args, kw_only=True):
    query: Text | None = None  # what to look for: an idea, a plan
    kernel: Source | None = None  # or a kernel: its nearest pairs
    problem: Name | None = None  # with kernel: whose problem it solves (names the query as a run does)
    device: Name | None = None
    language: Name | None = None
    op_type: Name | None = None
    top_m: Annotated[int, msgspec.Meta(ge=1, le=50)] = 8


class MemoryHit(_Result, kw_only=True):
    entry_id: str
    score: float
    problem: str
    device: str
    language: str
    speedup: float
    title: str
    text: str
    diff: str = ""
    # provenance: the run (or agent session) that verified the pair, and its kernels
    source_run: str = ""
    created_at: float = 0.0
    slow_kernel_id: str = ""
    fast_kernel_id: str = ""


class SearchMemoryResult(_Result, kw_only=True):
    memory: str
    query: str
    # "kept": the query's embedding was had before (asked before, or embedded ahead when the
    # server showed or judged the kernel); "computed": embedded for this search
    query_embedding: Literal["kept", "computed"]
    hits: list[MemoryHit]


# --- helpers ---------------------------------------------------------------------------------

A = TypeVar("A", bound=msgspec.Struct)


class ArgsError(ValueError):
    """Arguments a tool cannot take; the message is the one line the agent reads."""


def decode_args(arguments: dict[str, Any] | None, kind: type[A]) -> A:
    """`arguments` as `kind`, or ArgsError naming the field and the rule."""
    try:
        return msgspec.convert(arguments or {}, kind, strict=True)
    except msgspec.ValidationError as e:
        raise ArgsError(f"bad arguments: {e}") from None


def tool_schema(kind: type[msgspec.Struct]) -> dict[str, Any]:
    """The JSON schema of a Struct with the object at its root (MCP asks `type: object`
    there), its nested definitions under `$defs`."""
    full = msgspec.json.schema(kind)
    defs = dict(full.get("$defs", {}))
    root = dict(defs[kind.__name__])
    if len(defs) > 1:
        root["$defs"] = defs
    return root


def to_json(value: msgspec.Struct) -> dict[str, Any]:
    out: dict[str, Any] = msgspec.to_builtins(value)
    return out


# --- runs ------------------------------------------------------------------------------------


class StartRunArgs(_Args, kw_only=True):
    """An `accelopt run` of this server's root and memory, with its budget."""

    suite: Name
    problems: Annotated[list[Name], msgspec.Meta(min_length=1, max_length=20)]
    budget_usd: Usd  # the hard LLM budget of the run
    preset: Preset = "quick"
    iterations: Annotated[int, msgspec.Meta(ge=1, le=64)] | None = None
    model: Name = "builtin/tuner"  # the offline tuner by default; a litellm name for a real model
    device: Name | None = None


class RunRef(_Args, kw_only=True):
    run_id: RunId


class RunStatus(_Result, kw_only=True):
    run_id: str
    state: str  # running, completed, stopped, interrupted, failed, ... (accelopt runs' words)
    label: str = ""
    problems: int = 0
    iterations_done: int = 0
    iterations_planned: int | None = None
    kernels: int = 0
    speedup_geomean: float | None = None
    pct_peak_geomean: float | None = None
    cost_usd: float = 0.0
    budget_usd: float | None = None
    pid: int | None = None  # the process this server started, while it lives
    output_tail: str = ""  # the last lines `accelopt run` printed (this server's runs)


# --- campaigns -------------------------------------------------------------------------------


class StartCampaignArgs(_Args, kw_only=True):
    """A campaign (docs/campaigns.md) of this server's root and memory: its problems on their
    devices, one run after another as its scheduler decides, within its LLM budget."""

    # SUITE/PROBLEM (on the suite's device) or SUITE/PROBLEM@DEVICE
    problems: Annotated[list[Name], msgspec.Meta(min_length=1, max_length=50)]
    budget_usd: Usd  # the campaign's LLM budget in total: no run is scheduled past it
    daily_usd: Usd | None = None  # and per UTC day
    minutes: Annotated[float, msgspec.Meta(gt=0, le=10_080)] | None = None  # it stops after (a week at most)
    max_runs: Annotated[int, msgspec.Meta(ge=1, le=1000)] | None = None
    target_pct_peak: Annotated[float, msgspec.Meta(gt=0, le=1)] | None = None  # an item's goal (0.8: 80 %)
    name: Annotated[str, msgspec.Meta(pattern=r"^[A-Za-z0-9_-]{1,40}$")] = "agent"
    preset: Preset = "quick"  # each run's search
    iterations: Annotated[int, msgspec.Meta(ge=1, le=64)] | None = None  # each run's
    model: Name = "builtin/tuner"  # the offline tuner by default; a litellm name for a real model
    policy: Name = "expected_gain_v2"  # the scheduler's (accelopt/scheduler.py)
    seed: Annotated[int, msgspec.Meta(ge=0, le=2**31 - 1)] = 0


class CampaignRef(_Args, kw_only=True):
    campaign_id: RunId


class CampaignItemRow(_Result, kw_only=True):
    item: str  # PROBLEM@DEVICE
    device: str
    runs: int
    speedup: float  # over the suite's baseline, as `figures` says it was had
    pct_peak: float | None = None
    estimated: bool  # a cost model's figure (an emulated device), not a measurement
    figures: str  # how: measured (N rounds, +-spread), estimated
    state: str
    why: str  # its place in its device's queue at the last decision
    cost_usd: float


class CampaignStatus(_Result, kw_only=True):
    campaign_id: str
    state: str  # starting, running, paused, completed, interrupted, ... (campaign status' words)
    label: str = ""
    stopped: str = ""  # why it stopped (settled, budget, time, max_runs), once it did
    runs: int = 0
    running: list[str] = []  # its runs running now
    items: list[CampaignItemRow] = []
    speedup_geomean: float | None = None  # over its items' measured figures
    speedup_geomean_estimated: float | None = None
    spent_usd: float = 0.0
    budget_usd: float | None = None
    daily_usd: float | None = None
    resume: str = ""  # the command that goes on with it, where one does
    pid: int | None = None  # the driver this server started, while it lives
    output_tail: str = ""  # the last lines `accelopt campaign run` printed (this server's campaigns)


# --- replay and report -----------------------------------------------------------------------


class RecordedRef(_Args, kw_only=True):
    """A recorded run, agent session or campaign under this server's root."""

    run_id: RunId


class ReplayResult(_Result, kw_only=True):
    run_id: str
    kind: Literal["run", "campaign"]
    verified: bool  # every recorded decision re-derived from the recorded inputs
    events: int
    decisions_checked: int  # the coordinator's (a campaign: its scheduler's)
    inputs: int
    divergence: str = ""  # where the replay and the recording part, if they do
    pending_at_end: int = 0  # decisions an interrupted run or campaign had yet to publish
    runs_verified: int = 0  # a campaign: its runs whose decisions re-derived
    runs_without_log: int = 0  # a campaign: its runs with no log, which need none (never begun, or failed so)
    runs_failed: list[str] = []  # a campaign: each run that did not verify, and why


class ReportResult(_Result, kw_only=True):
    run_id: str
    kind: Literal["run", "campaign"]
    path: str  # the self-contained HTML report, on the server's host
    size_bytes: int
    events: int
    state: str  # as `accelopt runs` (or campaign status) says it
