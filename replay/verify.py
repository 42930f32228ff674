"""`replay --verify`: re-drive the coordinator over a recorded run and check every decision.

The recorded results (agent and profiler outputs, memory retrievals) are fed to a fresh
`CoordinatorCore` in log order. Every event the coordinator authored in the recording must
be one the replay decides, with equal content (timestamps aside) and before the recording
shows it; every decision the replay makes must be in the recording (unless the recording
ends early, as an interrupted run does). The first divergence is reported with its
position and both versions.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

import msgspec

from accelopt import catalog as ev
from accelopt.coordinator import CoordinatorCore

DECISION_TYPES = ev.DECISION_TYPES  # what the coordinator authors (`Event.author`)


def is_decision(e: ev.Event, run_started_id: str | None) -> bool:
    if type(e) in DECISION_TYPES:
        return True
    # the baseline kernels are proposed by the coordinator in reply to RunStarted
    return isinstance(e, ev.KernelProposed) and e.request_id == run_started_id


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
            return f"{head}: recorded as a coordinator decision, but the replay did not decide it"
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


class Verifier:
    """`verify` one event at a time, holding none of the log: a decision the replay made waits
    only until its recorded copy goes by, and a verified one is remembered by id (a copy of
    it later in the log is no divergence). A million-event run is verified with the
    coordinator's state, the decisions not yet recorded and the ids."""

    def __init__(self, run_id: str | None = None) -> None:
        self.core: CoordinatorCore | None = None  # made at the first event (its run, unless given)
        self.started_id: str | None = None
        self.pending: dict[str, ev.Event] = {}  # decided by the replay, not yet seen recorded
        self.verified: set[str] = set()
        self.expected_effects: set[str] = set()
        self.finished = False
        self.report = VerifyReport(run_id or "", 0, 0, 0)

    def feed(self, e: ev.Event) -> bool:
        """Check one recorded event; False once the replay and the recording have parted."""
        report = self.report
        if report.divergence is not None:
            return False
        if self.core is None:
            report.run_id = report.run_id or e.run_id
            self.core = CoordinatorCore(report.run_id)
        report.events += 1
        i = report.events
        if isinstance(e, ev.RunStarted) and self.started_id is None:
            self.started_id = e.event_id
        if isinstance(e, (ev.RunCompleted, ev.RunFailed)):
            self.finished = True
        # a decision of the replay recorded under another author (the core's RunFailed for a
        # failing model: a run's RunFailed is the session's) is checked as one too
        if is_decision(e, self.started_id) or e.event_id in self.pending:
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
        effect_id = (
            e.event_id
            if isinstance(e, ev.MemoryRetrieved)
            else e.result_id
            if isinstance(e, ev.MemoryRequested)
            else None
        )
        if effect_id is not None and effect_id not in self.expected_effects:
            report.divergence = Divergence(i, "unexpected-effect", e.event_id, e.type, recorded=e)
            return False
        step = self.core.step(e)
        for out in step.outputs:
            self.pending[out.event_id] = out
        self.expected_effects.update(eff.result_id for eff in step.effects)
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


def verify(events: Iterable[ev.Event], *, run_id: str | None = None) -> VerifyReport:
    v = Verifier(run_id)
    for e in events:
        if not v.feed(e):
            break
    return v.result()
