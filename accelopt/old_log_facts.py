"""The facts a log written before they were recorded left to its readers, derived once, here.

Since version 2 of `KernelProposed` and `FixRequested` a fix carries its lineage (the parent
and plan of the kernel it repairs), and since version 2 of `IterationCompleted` an
iteration's end names the kernels its problem keeps (`kept`). Readers read those fields. A
message of version 1 had neither: its upcaster (`accelopt/upcasters.py`) sees one message,
so it leaves them None, "not recorded", and its readers used to derive them from the log
before it, each on its own. `OldLogFacts` derives them, with the rules those readers
followed, for every reader of a run's log in order (the coordinator's core, the fold,
`replay --verify`'s recorded side): fed each event, it returns it with what an old version
left out filled in, and a message that carries its facts as it is.

A fix's lineage is never None in a message of version 2 (only kernels of an iteration are
fixed, and each has a plan), so "not recorded" is told apart without the message's version,
which decoding does not keep.

It holds, per problem, the lineage of the kernels of its latest iteration (a fix is
requested and proposed in the iteration of the kernel it repairs, which closes only once no
fix of it is pending), its baseline and its last beam: a run's current iterations, not the
run.
"""

from __future__ import annotations

from collections.abc import Callable

import msgspec

from accelopt import catalog as ev
from accelopt.search_state import kept_kernels

Lineage = tuple[str | None, str | None]  # (parent, plan)


class OldLogFacts:
    """Fed one run's events in log order: each with the facts its version left out filled in."""

    def __init__(self) -> None:
        self._iteration: dict[str, int] = {}  # problem -> the latest iteration proposed in
        self._lineage: dict[str, dict[str, Lineage]] = {}  # problem -> its kernels' (parent, plan)
        self._baseline: dict[str, str] = {}
        self._beam: dict[str, list[str]] = {}  # problem -> its last BeamSelected's kernels
        self._read: dict[type[ev.Event], Callable[..., ev.Event]] = ev.dispatch_table(
            ev.on(ev.KernelProposed, self._proposed),
            ev.on(ev.FixRequested, self._fix_requested),
            ev.on(ev.BeamSelected, self._beam_selected),
            ev.on(ev.IterationCompleted, self._iteration_completed),
        )

    def read(self, e: ev.Event) -> ev.Event:
        fill = self._read.get(type(e))
        return fill(e) if fill is not None else e

    def _proposed(self, e: ev.KernelProposed) -> ev.KernelProposed:
        kernels = self._lineage.setdefault(e.problem, {})
        if e.iteration > self._iteration.get(e.problem, -1):
            self._iteration[e.problem] = e.iteration
            kernels.clear()  # the iterations before are closed: none of their kernels is fixed now
        if e.fix_of and e.plan_id is None:
            # version 1: a fix stands in for the kernel it repairs (its first proposal's lineage)
            broken = kernels.get(e.fix_of)
            if broken is not None:
                e = msgspec.structs.replace(e, parent_id=broken[0], plan_id=broken[1])
        kernels.setdefault(e.kernel_id, (e.parent_id, e.plan_id))  # the first proposal owns a kernel
        if e.iteration == 0 and e.parent_id is None and not e.fix_of:
            self._baseline.setdefault(e.problem, e.kernel_id)
        return e

    def _fix_requested(self, e: ev.FixRequested) -> ev.FixRequested:
        if e.plan_id is not None:
            return e
        broken = self._lineage.get(e.problem, {}).get(e.kernel_id)
        if broken is None:
            return e
        return msgspec.structs.replace(e, parent_id=broken[0], plan_id=broken[1])

    def _beam_selected(self, e: ev.BeamSelected) -> ev.BeamSelected:
        self._beam[e.problem] = [m.kernel_id for m in e.beam]
        return e

    def _iteration_completed(self, e: ev.IterationCompleted) -> ev.IterationCompleted:
        if e.kept is not None:
            return e
        # version 1: the coordinator kept the baseline, the best and the beam of the last
        # BeamSelected (iteration 0 has none: its beam is the baseline, kept as such)
        kept = kept_kernels(
            self._baseline.get(e.problem), e.best_kernel_id or None, self._beam.get(e.problem, [])
        )
        return msgspec.structs.replace(e, kept=kept)
