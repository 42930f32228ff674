"""`replay --verify`: re-drive a log's decider over its recorded inputs and check every decision.

One check for any decider (`Decider`): a run's coordinator (`RunDecider`) or a campaign's
scheduler (`replay.campaign.CampaignDecider`). The recorded inputs are fed to a fresh
decider in log order. Every decision the log holds must be one the replay decides, with
equal content (timestamps aside) and before the log shows it; every decision the replay
makes must be in the log (unless the log ends early, as an interrupted run's or a killed
campaign's does). The first divergence is reported with its position and both versions.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Protocol

import msgspec

from accelopt import catalog as ev
from accelopt.coordinator import CoordinatorCore
from accelopt.old_log_facts import OldLogFacts

DECISION_TYPES = ev.DECISION_TYPES  # what the coordinator authors (`Event.author`)


def _comparable(e: ev.Event) -> ev.Event:
    return msgspec.structs.replace(e, ts=0.0)


@dataclass
class Divergence:
    position: int  # index of the recorded event where replay and recording part (1-based)
    kind: str  # "missing" | "different" | "extra" | "unexpected-effect"
    event_id: str
    event_type: str
    recorded: ev.Event | None = None
    replayed: ev.Event | None = None

    def describe(self) -> str:
        head = f"event #{self.position}: {self.event_type} {self.event_id[:12]}"
        if self.kind == "missing":
            return f"{head}: recorded as a decision, but the replay did not decide it"
        if self.kind == "extra":
            return f"{head}: the replay decided it, but the recording does not have it"
        if self.kind == "unexpected-effect":
            return f"{head}: a memory retrieval the replay did not ask for"
        diffs = field_diffs(self.recorded, self.replayed)
        return f"{head}: recorded and replayed versions differ in " + "; ".join(diffs)


def field_diffs(a: ev.Event | None, b: ev.Event | None, limit: int = 5) -> list[str]:
    if a is None or b is None:
        return ["presence"]
    da, db = msgspec.to_builtins(_comparable(a)), msgspec.to_builtins(_comparable(b))
    out = []
    for key in sorted(set(da) | set(db)):
        if da.get(key) != db.get(key):
            out.append(f"{key}: recorded {_short(da.get(key))} vs replayed {_short(db.get(key))}")
    return out[:limit] or ["(no field differs)"]


def _short(v: object, n: int = 120) -> str:
    s = repr(v)
    return s if len(s) <= n else s[: n - 3] + "..."


@dataclass
class VerifyReport:
    run_id: str
    events: int
    decisions_checked: int
    inputs: int
    divergence: Divergence | None = None
    pending_at_end: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.divergence is None


class Decider(Protocol):
    """What `replay --verify` re-drives over a log: the decisions of a run or a campaign as a
    function of the log's inputs (its state held inside)."""

    def read(self, e: ev.Event) -> ev.Event:
        """The recorded event as this decider reads a log: what an older version of its type
        left out filled in (`accelopt/old_log_facts.py`); fed every recorded event, in order."""
        ...

    def is_decision(self, e: ev.Event) -> bool:
        """Whether the recorded event is one of the decider's decisions (checked, never fed)."""
        ...

    def step(self, e: ev.Event) -> list[ev.Event]:
        """The decisions made on a recorded input (applied to the decider's state already)."""
        ...

    def unasked(self, e: ev.Event) -> bool:
        """Whether the input is the answer to a request the decider never made."""
        ...

    def ends(self, e: ev.Event) -> bool:
        """Whether the recorded event says the log is finished: after it, a decision the
        replay makes that the log lacks is a divergence, not one yet to be published."""
        ...


class RunDecider:
    """A run's coordinator (`CoordinatorCore`) as `replay --verify` drives it: its decisions are
    the types it authors and the baselines it proposes in reply to `RunStarted`; a memory
    retrieval is an effect it must have asked for."""

    def __init__(self, run_id: str) -> None:
        self.core = CoordinatorCore(run_id)
        self.old_log = OldLogFacts()
        self.started_id: str | None = None
        self.expected_effects: set[str] = set()

    def read(self, e: ev.Event) -> ev.Event:
        if self.started_id is None and isinstance(e, ev.RunStarted):
            self.started_id = e.event_id
        return self.old_log.read(e)

    def is_decision(self, e: ev.Event) -> bool:
        # the baseline kernels are proposed by the coordinator in reply to RunStarted
        return type(e) in DECISION_TYPES or (
            isinstance(e, ev.KernelProposed) and e.request_id == self.started_id
        )

    def step(self, e: ev.Event) -> list[ev.Event]:
        step = self.core.step(e)
        self.expected_effects.update(eff.result_id for eff in step.effects)
        return step.outputs

    def unasked(self, e: ev.Event) -> bool:
        effect_id = (
            e.event_id
            if isinstance(e, ev.MemoryRetrieved)
            else e.result_id
            if isinstance(e, ev.MemoryRequested)
            else None
        )
        return effect_id is not None and effect_id not in self.expected_effects

    def ends(self, e: ev.Event) -> bool:
        return isinstance(e, (ev.RunCompleted, ev.RunFailed))


class Verifier:
    """`verify` one event at a time, holding none of the log, for any decider (a run's by
    default): a decision the replay made waits only until its recorded copy goes by, and a
    verified one is remembered by id (a copy of it later in the log is no divergence). A
    million-event log is verified with the decider's state, the decisions not yet recorded
    and the ids."""

    def __init__(self, decider: Callable[[str], Decider] = RunDecider, log_id: str | None = None) -> None:
        self.make = decider
        self.decider: Decider | None = None  # made at the first event (its log's id, unless given)
        self.pending: dict[str, ev.Event] = {}  # decided by the replay, not yet seen recorded
        self.verified: set[str] = set()
        self.finished = False
        self.report = VerifyReport(log_id or "", 0, 0, 0)

    def feed(self, e: ev.Event) -> bool:
        """Check one recorded event; False once the replay and the log have parted."""
        report = self.report
        if report.divergence is not None:
            return False
        if self.decider is None:
            report.run_id = report.run_id or e.run_id
            self.decider = self.make(report.run_id)
        decider = self.decider
        report.events += 1
        i = report.events
        e = decider.read(e)
        self.finished = self.finished or decider.ends(e)
        # a decision of the replay recorded under another author (the core's RunFailed for a
        # failing model: a run's RunFailed is the session's) is checked as one too
        if decider.is_decision(e) or e.event_id in self.pending:
            report.decisions_checked += 1
            mine = self.pending.pop(e.event_id, None)
            if mine is None:
                if e.event_id in self.verified:
                    return True  # a copy of a decision already checked
                report.divergence = Divergence(i, "missing", e.event_id, e.type, recorded=e)
                return False
            if _comparable(mine) != _comparable(e):
                report.divergence = Divergence(i, "different", e.event_id, e.type, recorded=e, replayed=mine)
                return False
            self.verified.add(e.event_id)
            return True
        report.inputs += 1
        if decider.unasked(e):
            report.divergence = Divergence(i, "unexpected-effect", e.event_id, e.type, recorded=e)
            return False
        for out in decider.step(e):
            self.pending[out.event_id] = out
        return True

    def result(self) -> VerifyReport:
        return closing_report(self.report, list(self.pending.values()), finished=self.finished)


def closing_report(report: VerifyReport, extra: list[ev.Event], *, finished: bool) -> VerifyReport:
    """The report once every event was fed: decisions the replay made that the log never
    recorded are a divergence of a finished run, and what an interrupted one had yet to publish."""
    if report.events == 0:
        raise ValueError("empty log: nothing to verify")
    if report.divergence is None:
        if extra and finished:
            first = extra[0]
            report.divergence = Divergence(report.events, "extra", first.event_id, first.type, replayed=first)
        else:
            report.pending_at_end = [f"{d.type} {d.event_id[:12]}" for d in extra]
    return report


def verify(
    events: Iterable[ev.Event], *, run_id: str | None = None, decider: Callable[[str], Decider] = RunDecider
) -> VerifyReport:
    """Re-drive `decider` (a run's coordinator by default) over the log `events`."""
    v = Verifier(decider, run_id)
    for e in events:
        if not v.feed(e):
            break
    return v.result()
