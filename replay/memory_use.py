"""Which memory insights a run's planners received, and which they used.

An insight is *received* by a problem when a `MemoryRetrieved` of that problem carried it
to its planners; it is *used* when a plan written from a request that carried it names one
of the insight's constants. An insight's constants are the tunables its text changes
(`NAME 32 -> 64` phrases, `CHANGE:` lines, `-`/`+` define lines of a diff: the tuner's own
reading), else the UPPER_CASE tunables of the problem's baseline that its title names.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field

from accelopt import catalog as ev
from hardware_agents.languages.tunables import changes_in, find_tunables


@dataclass
class MemoryUse:
    problem: str
    received: set[str] = field(default_factory=set)  # memory entry ids retrieved for its planners
    used: set[str] = field(default_factory=set)  # of those, named by a plan made with them
    plans_following: int = 0  # plans that name a constant of an insight they were given


def insight_constants(title: str, text: str, tunables: Iterable[str] = ()) -> set[str]:
    names = {c.name for c in changes_in(f"{title}\n{text}")}
    if not names:
        words = set(re.findall(r"\b[A-Z_][A-Z0-9_]*[A-Z0-9]\b", title))
        names = words & set(tunables)
    return names


def _names(plan: str, constants: set[str]) -> bool:
    return any(re.search(r"\b" + re.escape(c) + r"\b", plan) for c in constants)


def memory_use(events: Iterable[ev.Event]) -> dict[str, MemoryUse]:
    """Per problem of the run: the insights received and used (see the module docstring)."""
    out: dict[str, MemoryUse] = {}
    tunables: dict[str, set[str]] = {}
    requests: dict[str, ev.PlanRequested] = {}
    constants: dict[str, set[str]] = {}
    for e in events:
        if isinstance(e, ev.RunStarted):
            for t in e.targets:
                out[t.problem.name] = MemoryUse(t.problem.name)
                src = t.problem.baseline.entry_file().content
                tunables[t.problem.name] = {k.name for k in find_tunables(src, t.problem.axis_values())}
        elif isinstance(e, ev.MemoryRetrieved) and e.problem in out:
            for x in e.entries:
                out[e.problem].received.add(x.entry_id)
                if x.entry_id not in constants:
                    constants[x.entry_id] = insight_constants(x.title, x.text, tunables.get(e.problem, ()))
        elif isinstance(e, ev.PlanRequested):
            requests[e.event_id] = e
        elif isinstance(e, ev.PlanProposed) and e.problem in out:
            req = requests.get(e.request_id)
            if req is None:
                continue
            followed = False
            for x in req.insights:
                names = constants.get(x.entry_id) or insight_constants(
                    x.title, x.text, tunables.get(e.problem, ())
                )
                if names and _names(e.plan, names):
                    out[e.problem].used.add(x.entry_id)
                    followed = True
            out[e.problem].plans_following += followed
    return out
