"""The event catalog: every fact of a run as an immutable msgspec Struct (see docs/architecture.md).

Each event carries the envelope fields (event_id, run_id, type, schema_version,
causation_id, ts), built in one place (`envelope`). `type` is the msgspec tag, i.e. the class
name; `schema_version` the version of its type (`VERSION_OF`, see `accelopt/upcasters.py`). Event ids are derived
deterministically from what the event is about (see `derive_event_id`), so re-publishing
a decision after a crash is de-duplicated by JetStream's `Nats-Msg-Id` (run id + event id).
"""

from __future__ import annotations

import hashlib
import typing
from collections.abc import Callable
from typing import Any, ClassVar, Concatenate, Literal

import msgspec

from accelopt.kernel_id import kernel_id
from accelopt.problem import Problem
from accelopt.profile import Profile
from accelopt.records import ChatMessage, MemoryEntry, ModelPrice, TokenUsage

Role = Literal["planner", "executor", "fixer", "summarizer"]
Stage = Literal["plan", "implement", "fix", "summarize", "profile", "memory"]
# Who publishes an event type: "coordinator", its decisions (what `replay --verify` re-derives);
# "effect", the coordinator's requests for a side effect (a retrieval: the recording's answer
# is what counts); the session (start, failure: the coordinator also fails a run whose LLM
# calls keep failing, but the session may fail it first, so it is never re-derived); the LLM
# roles, the LLM gateway, the profilers and the memory workers; a campaign's driver ("campaign":
# its start, resumes, clock ticks and the outcome of each of its runs) and its scheduler
# ("scheduler": its decisions, what `replay --verify` re-derives of a campaign).
Author = Literal[
    "coordinator", "effect", "session", "role", "gateway", "profiler", "memory", "campaign", "scheduler"
]
# The readers of a run's log that account for every type of it: each type is a row of the
# reader's dispatch table or declared, with the type, as one that reader skips (`ignored_by`)
RunReader = Literal["coordinator", "fold"]
# How a run names its kernels (`RunStarted.kernel_ids`): "content", by what they are
# (`accelopt.kernel_id`); "request", by what proposed them (`derive_event_id`), the rule of the
# runs recorded before kernels were content-addressed: a RunStarted without the field reads so
KernelIds = Literal["request", "content"]


def derive_event_id(run_id: str, type_name: str, *key: object) -> str:
    """A stable id for the event of `type_name` about `key`, unique within its run.

    `run_id` scopes the id but is deliberately not hashed: two runs that make the same
    decision give it the same id, so a replay or an ablation of a run reproduces its ids,
    prompts (which may be seeded by request ids) and content hashes. Uniqueness on the
    stream comes from the message id `msg_id(run_id, event_id)`. An id that must be unique
    across runs (a memory entry) puts the run id into `key`.
    """
    h = hashlib.sha256()
    for part in (type_name, *key):
        h.update(str(part).encode())
        h.update(b"\x1f")
    return h.hexdigest()[:32]


def msg_id(run_id: str, event_id: str) -> str:
    """The stream-wide de-duplication id (`Nats-Msg-Id`) of an event."""
    return f"{run_id}:{event_id}"


class Event(msgspec.Struct, tag_field="type", kw_only=True, frozen=True):
    # declared by every event type: its subject token (`events/subjects.py`) and its author;
    # and the readers of a run's log it changes nothing for (`skipped_by`), if any
    subject: ClassVar[str]
    author: ClassVar[Author]
    ignored_by: ClassVar[frozenset[RunReader]] = frozenset()

    event_id: str
    run_id: str
    ts: float
    causation_id: str | None = None
    # the version of the event's type this message was written in: 1, or the version a type
    # declares by this field's default (`schema_version: int = 2`) when a change of its fields
    # comes with an upcaster from the version before (`accelopt/upcasters.py`)
    schema_version: int = 1

    @property
    def type(self) -> str:
        return type(self).__name__


# --- run lifecycle -------------------------------------------------------------------------


class ProblemTarget(msgspec.Struct, kw_only=True, frozen=True, omit_defaults=True):
    """A problem to optimize on one device kind, as recorded in RunStarted."""

    problem: Problem
    device: str
    language: str
    content_hash: str
    # a campaign's run (`CampaignDriver`): the entry source of its suite's own baseline, where
    # `problem`'s baseline is the item's best so far. Its end-of-problem re-measure times this
    # kernel as a third side (and runs every side to its end), so the campaign takes its
    # item's measurement from those rounds (actors/runtime/item_measure.py)
    origin_source: str = ""


class RunStarted(Event, tag=True, frozen=True):
    subject: ClassVar[str] = "run.started"
    author: ClassVar[Author] = "session"

    config: dict[str, Any]
    seed: int
    targets: list[ProblemTarget]
    prices: dict[str, ModelPrice] = {}
    toolchain: dict[str, str] = {}
    parent_run: str | None = None
    fork_iteration: int | None = None
    fork_config: dict[str, Any] | None = None  # the parent's config, in force up to fork_iteration
    kernel_ids: KernelIds = "request"  # a new run says "content" (actors/runtime/session.py)

    def new_kernel_id(self, problem: str, language: str, source: str, *proposal: object) -> str:
        """The id this run gives a kernel proposed to it: the content id (`kernel_id`); in a
        run recorded before kernels were content-addressed, the id derived from `proposal`
        (what proposed it), so such a run replays, verifies, resumes and forks with the ids
        it recorded. The one rule the coordinator (baselines) and the roles (candidates,
        fixes) follow."""
        if self.kernel_ids == "content":
            return kernel_id(problem, language, source)
        return derive_event_id(self.run_id, "Kernel", *proposal)

    def parent_settings_at(self, iteration: int) -> bool:
        """Whether `iteration` runs with the parent's settings: an ablation forked at
        iteration K repeats its parent's decisions and calls up to K and uses its own after.
        The one rule every reader of a run's settings follows."""
        return (
            self.fork_config is not None
            and self.fork_iteration is not None
            and iteration <= self.fork_iteration
        )

    def config_at(self, iteration: int) -> dict[str, Any]:
        """The recorded settings in force for `iteration` (decode with `accelopt.config.recorded_config`)."""
        fork = self.fork_config
        return fork if fork is not None and self.parent_settings_at(iteration) else self.config


class RunCompleted(Event, tag=True, frozen=True, kw_only=True):
    subject: ClassVar[str] = "run.completed"
    author: ClassVar[Author] = "coordinator"
    schema_version: int = 2  # 2: `best` is `best_kernel_ids`

    reason: str
    best_kernel_ids: dict[str, str] = {}  # problem -> its best kernel's id


class RunFailed(Event, tag=True, frozen=True):
    subject: ClassVar[str] = "run.failed"
    author: ClassVar[Author] = "session"

    reason: str
    detail: str = ""


class BudgetExceeded(Event, tag=True, frozen=True):
    subject: ClassVar[str] = "run.budget_exceeded"
    author: ClassVar[Author] = "coordinator"
    ignored_by: ClassVar[frozenset[RunReader]] = frozenset({"coordinator"})  # applied when decided

    spent_usd: float
    budget_usd: float


# --- iterations -----------------------------------------------------------------------------


class IterationStarted(Event, tag=True, frozen=True):
    subject: ClassVar[str] = "iteration.started"
    author: ClassVar[Author] = "coordinator"
    ignored_by: ClassVar[frozenset[RunReader]] = frozenset({"fold"})  # its beam is the view's already

    problem: str
    iteration: int
    beam: list[str]


class BeamMember(msgspec.Struct, kw_only=True, frozen=True):
    kernel_id: str
    latency_ms: float  # measured (0.0 for an unmeasured kernel)
    peak_fraction: float | None = msgspec.field(default=None, name="pct_peak")
    estimated_ms: float | None = None  # an unmeasured kernel's estimated latency (never a measurement)


class BeamSelected(Event, tag=True, frozen=True):
    subject: ClassVar[str] = "iteration.beam_selected"
    author: ClassVar[Author] = "coordinator"
    ignored_by: ClassVar[frozenset[RunReader]] = frozenset({"coordinator"})  # applied when decided

    problem: str
    iteration: int
    beam: list[BeamMember]
    best_kernel_id: str


class IterationCompleted(Event, tag=True, frozen=True, kw_only=True):
    subject: ClassVar[str] = "iteration.completed"
    author: ClassVar[Author] = "coordinator"
    schema_version: int = 2  # 2: `kept` names the kernels the problem keeps

    problem: str
    iteration: int
    best_kernel_id: str
    best_latency_ms: float | None
    best_pct_peak: float | None = None
    kernels_profiled: int = 0
    note: str = ""
    # an unmeasured best kernel's estimated latency and % of peak (a cost model's, not measured)
    best_estimated_ms: float | None = None
    best_estimated_pct_peak: float | None = None
    # the kernels the problem keeps once this iteration is closed (its baseline, best and beam,
    # decided by the coordinator, `search_state.kept_kernels`); no later decision reads the
    # others. None: written before version 2 (`accelopt/old_log_facts.py` fills it in)
    kept: list[str] | None = None


# --- memory ---------------------------------------------------------------------------------


class RetrievedInsight(msgspec.Struct, kw_only=True, frozen=True, omit_defaults=True):
    entry_id: str
    problem: str
    device: str
    language: str
    speedup: float
    title: str
    text: str
    score: float = 0.0
    diff: str = ""  # slow -> fast as a unified diff of the changed hunks (bounded, whole hunks only)


class MemoryRequested(Event, tag=True, frozen=True):
    """A retrieval the coordinator needs for one beam candidate, answered by a memory worker
    of the run's memory (`memory["uri"]`) with the `MemoryRetrieved` of id `result_id`.
    Self-contained: the query's inputs and the run's memory settings in force at `iteration`."""

    subject: ClassVar[str] = "memory.requested"
    author: ClassVar[Author] = "effect"
    # the coordinator asked for it; the fold reads the answer
    ignored_by: ClassVar[frozenset[RunReader]] = frozenset({"coordinator", "fold"})

    result_id: str
    problem: str
    op_type: str
    device: str
    language: str
    iteration: int
    candidate_id: str
    candidate_source: str
    memory: dict[str, Any]  # the run's MemoryConfig at `iteration`, as a dict
    expect_entry_ids: list[str] = []  # the run's own entries so far: wait until they are indexed


class MemoryRetrieved(Event, tag=True, frozen=True):
    subject: ClassVar[str] = "memory.retrieved"
    author: ClassVar[Author] = "memory"

    problem: str
    iteration: int
    candidate_id: str
    query: str
    entries: list[RetrievedInsight]
    note: str = ""  # what the run should be told (retrieval failed, entries not indexed in time)


class MemoryEntryAdded(Event, tag=True, frozen=True):
    subject: ClassVar[str] = "memory.entry_added"
    author: ClassVar[Author] = "coordinator"
    ignored_by: ClassVar[frozenset[RunReader]] = frozenset({"coordinator"})  # applied when decided

    entry: MemoryEntry


class MemoryIndexed(Event, tag=True, frozen=True):
    """The memory curator committed a run's entry to the run's memory."""

    subject: ClassVar[str] = "memory.indexed"
    author: ClassVar[Author] = "memory"
    ignored_by: ClassVar[frozenset[RunReader]] = frozenset({"coordinator", "fold"})  # a receipt

    entry_id: str


class AgentMemoryEntryAdded(Event, tag=True, frozen=True):
    """A memory entry an agent session added (`accelopt mcp`'s record_insight): the agent's
    insight on a slow->fast pair the session's own judge verified, its `source_run` the
    session. A run's `MemoryEntryAdded` is its coordinator's decision; this one is the
    session's, so `replay --verify` reads it as an input. The fold shows it with a run's
    entries and `accelopt memory rebuild` projects it as it projects theirs."""

    subject: ClassVar[str] = "memory.agent_entry_added"
    author: ClassVar[Author] = "session"
    ignored_by: ClassVar[frozenset[RunReader]] = frozenset({"coordinator"})  # no run decides on it

    entry: MemoryEntry
    client: str  # the MCP client that asked: its name and version
    pair_id: str  # the verified pair (compare_kernels) the insight is attached to


# --- LLM roles -----------------------------------------------------------------------------


class PlanRequested(Event, tag=True, frozen=True):
    """Self-contained: the planner needs only this and the run's RunStarted (problem)."""

    subject: ClassVar[str] = "plan.requested"
    author: ClassVar[Author] = "coordinator"

    problem: str
    iteration: int
    candidate_id: str
    sample_index: int
    language: str = "c"
    device: str = "cpu"
    candidate_source: str = ""
    candidate_profile: Profile | None = None
    insights: list[RetrievedInsight] = []
    memory_event_id: str | None = None


class LLMCallCompleted(Event, tag=True, frozen=True):
    subject: ClassVar[str] = "llm.completed"
    author: ClassVar[Author] = "gateway"

    role: Role
    request_id: str
    model: str
    params: dict[str, Any]
    messages: list[ChatMessage]
    response: str | None
    usage: TokenUsage
    cost_usd: float
    latency_s: float
    content_hash: str
    attempt: int = 0
    error: str | None = None
    served_from: str | None = None
    finish_reason: str | None = None  # "stop", "length" (truncated by max_tokens), ...
    reasoning: str | None = None  # the provider's separate reasoning text, when it returns one
    permanent: bool = False  # failed with an error no retry can fix (auth, unknown model, bad request)


class PlanProposed(Event, tag=True, frozen=True):
    subject: ClassVar[str] = "plan.proposed"
    author: ClassVar[Author] = "role"

    problem: str
    iteration: int
    candidate_id: str
    request_id: str
    plan: str
    llm_call_id: str


class ImplementationRequested(Event, tag=True, frozen=True):
    subject: ClassVar[str] = "impl.requested"
    author: ClassVar[Author] = "coordinator"

    problem: str
    iteration: int
    candidate_id: str
    plan_id: str
    sample_index: int
    language: str = "c"
    device: str = "cpu"
    plan: str = ""
    candidate_source: str = ""


class KernelProposed(Event, tag=True, frozen=True, kw_only=True):
    subject: ClassVar[str] = "kernel.proposed"
    author: ClassVar[Author] = "role"
    schema_version: int = 2  # 2: a fix carries its lineage (its FixRequested's parent and plan)

    kernel_id: str
    problem: str
    iteration: int
    # the kernel's lineage: the candidate it derives from and the PlanProposed it implements;
    # a fix's are those of the kernel it repairs, as its FixRequested carried them (a fix of
    # version 1 named none: `accelopt/old_log_facts.py` fills them in)
    parent_id: str | None
    plan_id: str | None
    request_id: str
    language: str
    source: str
    fix_of: str | None = None
    fix_round: int = 0
    llm_call_id: str | None = None


class ProposalFailed(Event, tag=True, frozen=True):
    subject: ClassVar[str] = "proposal.failed"
    author: ClassVar[Author] = "role"

    stage: Stage
    request_id: str
    problem: str
    iteration: int
    reason: str
    detail: str = ""
    llm_call_id: str | None = None


class FixRequested(Event, tag=True, frozen=True, kw_only=True):
    """Repair `kernel_id` (which failed with `status`), round `fix_round` of at most F. The
    fix stands in for the broken kernel: it carries `kernel_id`'s lineage (`parent_id`,
    `plan_id`), which the fixer copies onto the kernel it proposes."""

    subject: ClassVar[str] = "fix.requested"
    author: ClassVar[Author] = "coordinator"
    schema_version: int = 2  # 2: the lineage the fix inherits (`parent_id`, `plan_id`)

    kernel_id: str
    # the broken kernel's parent and plan (a kernel of an iteration, the only kind fixed,
    # always has a plan); None in a message of version 1 (`accelopt/old_log_facts.py`)
    parent_id: str | None
    plan_id: str | None
    problem: str
    iteration: int
    fix_round: int
    error_log: str
    status: str = ""
    language: str = "c"
    device: str = "cpu"
    source: str = ""
    parent_source: str = ""


class SummaryRequested(Event, tag=True, frozen=True):
    """Distil the slow->fast pair into an insight. For a regression (positive=False) the
    roles are reversed: slow = the regressed child, fast = its parent ("undo this")."""

    subject: ClassVar[str] = "summary.requested"
    author: ClassVar[Author] = "coordinator"

    problem: str
    iteration: int
    slow_kernel_id: str
    fast_kernel_id: str
    speedup: float
    positive: bool
    language: str = "c"
    device: str = "cpu"
    slow_source: str = ""
    fast_source: str = ""
    estimated: bool = False  # the speedup is a cost model's estimate, not a measurement


class InsightSummarized(Event, tag=True, frozen=True):
    subject: ClassVar[str] = "summary.completed"
    author: ClassVar[Author] = "role"

    problem: str
    iteration: int
    request_id: str
    title: str
    text: str
    noop: bool = False
    llm_call_id: str | None = None


# --- profiling ------------------------------------------------------------------------------


class ProfileRequested(Event, tag=True, frozen=True):
    subject: ClassVar[str] = "profile.requested"
    author: ClassVar[Author] = "coordinator"

    kernel_id: str
    problem: str
    device: str
    language: str
    source: str
    purpose: Literal["baseline", "candidate", "reverify", "remeasure"] = "candidate"
    seed_offset: int = 0


class KernelProfiled(Event, tag=True, frozen=True, kw_only=True):
    subject: ClassVar[str] = "profile.completed"
    author: ClassVar[Author] = "profiler"
    schema_version: int = 2  # 2: status no_triton_launch is incorrect with that reason

    kernel_id: str
    problem: str
    device: str
    request_id: str
    profile: Profile
    worker: str = ""
    served_from: str | None = None  # the recorded KernelProfiled this result was served from


class ProfileCancelled(Event, tag=True, frozen=True):
    """A profile its requester gave up on (an `accelopt mcp` session's call cancelled, or out
    of the server's time): the profiler running request `request_id` kills its sandboxed
    children and answers it at once with a `timeout` profile of reason `cancelled`; one that
    has not started is answered so without running. The `KernelProfiled` stays the request's
    one terminal answer: readers of a run's log read that, not this."""

    subject: ClassVar[str] = "profile.cancelled"
    author: ClassVar[Author] = "session"
    ignored_by: ClassVar[frozenset[RunReader]] = frozenset({"coordinator", "fold"})  # the answer counts

    request_id: str  # the ProfileRequested's event_id
    reason: str = ""


class RemeasuredSide(msgspec.Struct, kw_only=True, frozen=True, omit_defaults=True):
    """One kernel of an end-of-problem re-measure: its interleaved rounds."""

    kernel_id: str
    status: str = "passed"  # a failure stops the re-measure: it is the result
    rounds_ms: list[float] = []
    median_ms: float | None = None
    spread: float = 0.0  # relative noise of the side: max(IQR/median of the rounds, profiles' spread)
    peak_fraction: float | None = msgspec.field(default=None, name="pct_peak")
    log_head: str = ""


class ProblemRemeasured(Event, tag=True, frozen=True):
    """The end of a problem: its baseline and best kernel profiled again in interleaved rounds
    (baseline, best; then best, baseline; ...) on fresh seeds, so both see the same machine
    conditions. `speedup` is the ratio of the sides' medians; `noise` the relative band
    within which two speedups of these kernels cannot be told apart; `agrees`: the recorded
    speedup is within that band of the re-measured one."""

    subject: ClassVar[str] = "problem.remeasured"
    author: ClassVar[Author] = "coordinator"
    ignored_by: ClassVar[frozenset[RunReader]] = frozenset({"coordinator"})  # applied when decided

    problem: str
    rounds: int
    seed_offsets: list[int]
    baseline: RemeasuredSide
    best: RemeasuredSide
    recorded_speedup: float | None = None
    speedup: float | None = None
    noise: float = 0.0
    agrees: bool = True
    # a campaign's run (`ProblemTarget.origin_source`): its suite's baseline in the same rounds
    # (None: not asked, or it is the baseline's or the best's source)
    origin: RemeasuredSide | None = None


# --- campaigns ------------------------------------------------------------------------------
# A campaign (docs/campaigns.md) is a queue of problems on several device kinds worked on by
# many runs; its events go to the same log under the campaign's id (`accelopt.<campaign>.>`),
# its runs' under their own. Its scheduler's decisions are a pure function of its inputs
# (`accelopt/campaign_core.py`), so a resumed campaign and `replay --verify` re-derive them.


class CampaignItem(msgspec.Struct, kw_only=True, frozen=True):
    """One problem on one device kind: what the scheduler picks from. `key` is
    `SUITE/PROBLEM@DEVICE`."""

    key: str
    suite: str
    problem: str
    device: str
    language: str
    op_type: str
    content_hash: str


class CampaignStarted(Event, tag=True, frozen=True):
    subject: ClassVar[str] = "campaign.started"
    author: ClassVar[Author] = "campaign"

    name: str
    spec: dict[str, Any]  # the campaign file as parsed (`accelopt.campaign.CampaignSpec`)
    items: list[CampaignItem]
    root: str
    memory_uri: str
    # the most one LLM call may cost before any was seen (from the models' prices and output
    # allowance; `budget.max_call_usd` when set): what the budget keeps in reserve per call in flight
    max_call_usd: float = 0.0
    # item key -> the items whose insights its runs' planners see (the memory's rule,
    # `memory_index.retrieval.planner_sees`, under the memory settings of its runs): what the
    # scheduler counts as an item's new insights. None: a log from before, which counts those
    # of its operator on any item (or of its kernel language, as its policy's `insight_scope` says)
    insight_sources: dict[str, list[str]] | None = None
    # how its items' speedups and % of peak are had: "measured" (each run's end measures the
    # item's best against the suite's baseline: CampaignItemMeasured); "product" (a log from
    # before: the product of its runs' gains, shown marked as such)
    item_figures: Literal["product", "measured"] = "product"


class CampaignResumed(Event, tag=True, frozen=True):
    """The campaign's driver started again (`accelopt campaign resume`): parked devices are
    tried again."""

    subject: ClassVar[str] = "campaign.resumed"
    author: ClassVar[Author] = "campaign"

    attempt: int


class CampaignTicked(Event, tag=True, frozen=True):
    """The clock, as an input: a paused campaign's day has turned, or its time is up."""

    subject: ClassVar[str] = "campaign.ticked"
    author: ClassVar[Author] = "campaign"

    why: str


class ScheduleScore(msgspec.Struct, kw_only=True, frozen=True):
    """Why an item ranks where it does: the policy's score and what it was made of."""

    score: float
    headroom: float  # 1 - its best kernel's fraction of peak (1: not known)
    expected_gain: float  # the expected log-speedup of its next run (recent runs, prior)
    new_insights: int  # memory insights of its operator learnt elsewhere since its last run
    cost_usd: float  # LLM spend on it so far
    runs: int
    expected_s: float  # the expected length of its next run
    why: str


class QueueEntry(msgspec.Struct, kw_only=True, frozen=True):
    """One item of a device's queue when a run was scheduled: its rank's reasons, or why it
    is not in line (running, settled, parked)."""

    item: str
    state: str  # "picked", "ready", "running", "settled: plateau", "settled: target", "parked", ...
    score: float | None = None
    why: str = ""


class CampaignRunScheduled(Event, tag=True, frozen=True):
    subject: ClassVar[str] = "campaign.run_scheduled"
    author: ClassVar[Author] = "scheduler"

    run: str  # the run's id (`<campaign>-r<index>`); the envelope's run_id is the campaign's
    index: int  # the campaign's runs in the order they were scheduled, from 1
    item: str
    device: str
    seed: int
    policy: str
    reason: ScheduleScore
    queue: list[QueueEntry]
    day: str  # the UTC day whose budget the run spends
    budget_usd: float | None = None  # the run's llm.budget_usd (None: the campaign has no cap)
    llm_inflight: int | None = None  # the run's limits.llm_inflight_per_role, where the budget bounds it
    deadline_ts: float | None = None  # the campaign's time limit: the run stops there
    start_run: str | None = (
        None  # the run whose best kernel this one starts from (None: the suite's baseline)
    )
    start_kernel: str | None = None


class CampaignRunFinished(Event, tag=True, frozen=True):
    """What one run of the campaign came to, read from the run's own log."""

    subject: ClassVar[str] = "campaign.run_finished"
    author: ClassVar[Author] = "campaign"

    run: str  # the run's id; the envelope's run_id is the campaign's
    item: str
    status: str  # the run's: completed, completed (budget), failed, incomplete (stopped at the deadline)
    reason: str = ""  # a failed run's reason
    gain: float | None = None  # its best kernel over the kernel it started from (None: nothing usable)
    gain_source: str = ""  # "remeasured", "recorded" or "estimated"
    estimated: bool = False  # its figures are a cost model's (an emulated device), not measurements
    best_kernel_id: str | None = None
    best_source: str = ""
    start_ms: float | None = None  # the kernel it started from, and its best (estimated where `estimated`)
    best_ms: float | None = None
    pct_peak: float | None = None  # its best kernel's fraction of peak
    cost_usd: float = 0.0
    max_call_usd: float = 0.0  # its most expensive LLM call
    llm_calls: int = 0
    kernels: int = 0
    duration_s: float = 0.0
    memory_entries: list[str] = []
    unserved: list[str] = []  # work queues nobody served (`profiler-<device>`): why it failed


class CampaignItemMeasured(Event, tag=True, frozen=True):
    """At a run's end, its item measured: the suite's baseline (`origin`), the kernel the run
    started from (`start`, where it is not the baseline) and the run's best (`candidate`, where
    it is a new source), in interleaved rounds on fresh seeds on a measured device, by the
    cost model's estimate on an emulated one (status `unmeasured`, one round: it is
    deterministic). The item's speedup and % of peak are this event's figures (never a
    product of runs' gains); the run's gain is candidate over start in the same rounds.
    Published just before the run's `CampaignRunFinished`."""

    subject: ClassVar[str] = "campaign.item_measured"
    author: ClassVar[Author] = "campaign"

    run: str  # the run whose end it follows; the envelope's run_id is the campaign's
    item: str
    method: Literal["interleaved", "estimated"]
    rounds: int
    seed_offsets: list[int] = []
    origin: RemeasuredSide | None = None
    start: RemeasuredSide | None = None
    candidate: RemeasuredSide | None = None
    error: str = ""  # nothing could be measured (the run's kernels are not taken)
    # the run's own `ProblemRemeasured` whose rounds these are (it timed exactly these sources
    # on the item's device, every side to its end, on fresh seeds); "": the campaign's own
    # rounds after the run
    run_remeasure: str = ""


class CampaignBudgetSpent(Event, tag=True, frozen=True):
    subject: ClassVar[str] = "campaign.budget_spent"
    author: ClassVar[Author] = "scheduler"

    run: str  # the run whose end this spend follows
    day: str
    spent_usd: float  # the campaign's, in total
    day_spent_usd: float  # of the runs scheduled on `day`
    total_usd: float | None
    daily_usd: float | None


class CampaignDeviceParked(Event, tag=True, frozen=True):
    """No profiler serves this device kind: its items wait until the campaign is resumed."""

    subject: ClassVar[str] = "campaign.device_parked"
    author: ClassVar[Author] = "scheduler"

    device: str
    reason: str
    items: list[str]


class CampaignPaused(Event, tag=True, frozen=True):
    subject: ClassVar[str] = "campaign.paused"
    author: ClassVar[Author] = "scheduler"

    reason: str
    until_ts: float


class CampaignStopped(Event, tag=True, frozen=True):
    subject: ClassVar[str] = "campaign.stopped"
    author: ClassVar[Author] = "scheduler"

    reason: str  # "settled", "budget", "time", "max_runs", "no profilers"
    detail: str = ""


# --- the LLM roles: the one table of them ----------------------------------------------------


class LLMRole(typing.NamedTuple):
    """One LLM role as the log and the config know it: the request it answers, the stage its
    failures are filed under, and its output allowance (`max_tokens` below `llm.default`, so
    `llm.default.max_tokens` still sets every role). What it does with a request (its prompt,
    its answer, the offline tuner's reply, its worker) is its row of `actors/llm/role_table.py`."""

    name: Role
    request: type[Event]
    stage: Stage
    max_tokens: int


# the planner reasons before it plans, the executor and fixer write whole kernels after
# reasoning (the AccelOpt paper's settings: planner 10k, executor 65,536); the gateway caps an
# allowance at the model's own output limit where litellm's model info knows it
LLM_ROLE_TABLE: tuple[LLMRole, ...] = (
    LLMRole("planner", PlanRequested, "plan", max_tokens=16_384),
    LLMRole("executor", ImplementationRequested, "implement", max_tokens=65_536),
    LLMRole("fixer", FixRequested, "fix", max_tokens=65_536),
    LLMRole("summarizer", SummaryRequested, "summarize", max_tokens=8_192),
)
# views of the table, for the lookups readers make
LLM_ROLES: tuple[Role, ...] = tuple(r.name for r in LLM_ROLE_TABLE)
LLM_ROLE: dict[Role, LLMRole] = {r.name: r for r in LLM_ROLE_TABLE}
REQUEST_OF_ROLE: dict[Role, type[Event]] = {r.name: r.request for r in LLM_ROLE_TABLE}
ROLE_OF_REQUEST: dict[type[Event], Role] = {r.request: r.name for r in LLM_ROLE_TABLE}
STAGE_OF_ROLE: dict[Role, Stage] = {r.name: r.stage for r in LLM_ROLE_TABLE}


def is_llm_role(name: str) -> typing.TypeGuard[Role]:
    """Whether `name` (a command-line word, a config key) is one of the LLM roles."""
    return name in LLM_ROLES


# Every event type: the Event classes above, in the order they are declared (a new one is its
# class and nothing else here), and their union, which msgspec decodes a log with
EVENT_TYPES: tuple[type[Event], ...] = tuple(Event.__subclasses__())
AnyEvent: Any = typing.Union[EVENT_TYPES]  # noqa: UP007 (a union built from the tuple)
EVENTS_BY_NAME: dict[str, type[Event]] = {t.__name__: t for t in EVENT_TYPES}
# each type's version: what its new messages say (`schema_version`'s default), what older
# ones are upcast to
VERSION_OF: dict[type[Event], int] = {
    t: next(f.default for f in msgspec.structs.fields(t) if f.name == "schema_version") for t in EVENT_TYPES
}
# What the coordinator decides (everything else on a run's log is an input to it)
DECISION_TYPES: frozenset[type[Event]] = frozenset(t for t in EVENT_TYPES if t.author == "coordinator")
# What a campaign's scheduler decides (the rest of a campaign's log is its inputs)
CAMPAIGN_DECISION_TYPES: frozenset[type[Event]] = frozenset(t for t in EVENT_TYPES if t.author == "scheduler")
CAMPAIGN_TYPES: frozenset[type[Event]] = frozenset(
    t for t in EVENT_TYPES if t.author in ("campaign", "scheduler")
)
# What a run's log holds (a campaign's events go to the same stream under the campaign's id)
RUN_TYPES: frozenset[type[Event]] = frozenset(EVENT_TYPES) - CAMPAIGN_TYPES


def skipped_by(reader: RunReader) -> frozenset[type[Event]]:
    """The types of a run's log that `reader` skips (its `IGNORED`): those declaring it."""
    return frozenset(t for t in RUN_TYPES if reader in t.ignored_by)


# --- building events: the one envelope builder --------------------------------------------


class Envelope(typing.TypedDict):
    """The envelope fields of a new event (`schema_version` keeps its default), spread into
    its constructor: `KernelProfiled(**envelope(KernelProfiled, run, request.event_id, ...), ...)`."""

    event_id: str
    run_id: str
    ts: float
    causation_id: str | None


def envelope(
    event_type: type[Event],
    run_id: str,
    *key: object,
    ts: float,
    cause: Event | str | None = None,
    event_id: str | None = None,
) -> Envelope:
    """The envelope of the `event_type` event about `key` in run `run_id` (a campaign's
    events: the campaign's id): its id derived from them (`derive_event_id`), or `event_id`
    where the id was fixed beforehand (a `MemoryRetrieved` answers with its request's
    `result_id`); `ts` the author's clock (the coordinator's is an input, so it is passed,
    never read here); `cause` the event (or the id of the event) it answers."""
    return {
        "event_id": event_id if event_id is not None else derive_event_id(run_id, event_type.__name__, *key),
        "run_id": run_id,
        "ts": ts,
        "causation_id": cause.event_id if isinstance(cause, Event) else cause,
    }


# --- reading events: dispatch tables written out -------------------------------------------

_E = typing.TypeVar("_E", bound=Event)
_P = typing.ParamSpec("_P")
_R = typing.TypeVar("_R")


def on(
    event_type: type[_E], handler: Callable[Concatenate[_E, _P], _R]
) -> tuple[type[Event], Callable[..., _R]]:
    """One row of a reader's dispatch table: `handler` takes `event_type` first (a type checker
    refuses a handler of another event type: `on(KernelProposed, self._on_kernel_profiled)`)."""
    return event_type, handler


def dispatch_table(*rows: tuple[type[Event], Callable[..., _R]]) -> dict[type[Event], Callable[..., _R]]:
    """A reader's event type -> handler table from its rows (`on(...)`), each type once: the
    table is the list a reader reads to see what is handled where (`tests/events/
    test_event_catalog.py` checks each reader's table against the types it reads)."""
    table: dict[type[Event], Callable[..., _R]] = {}
    for event_type, handler in rows:
        if event_type in table:
            raise ValueError(f"{event_type.__name__} has two handlers")
        table[event_type] = handler
    return table
