"""A run's end-of-problem re-measure: the protocol of `accelopt.remeasure` over the baseline
and the best kernel, driven through the run's log: one `ProfileRequested` of purpose
"remeasure" at a time (so no two overlap), each answered by its `KernelProfiled`, and at the
end the `ProblemRemeasured` that compares them (the search loop then closes the problem).

A campaign's run (its target's `origin_source`: the suite's own baseline, where the run
starts from the item's best so far) times that kernel too, as a third side in the same
rounds, and runs every side to its end (a side that fails ends only itself): the rounds are
then exactly the item's measurement (actors/runtime/item_measure.py), which the campaign takes
from this event instead of profiling the same kernels again after the run."""

from __future__ import annotations

from accelopt import catalog as ev
from accelopt.remeasure import Remeasure, compare, run_seed_base
from accelopt.search_state import Phase, ProblemState, Run


class RunRemeasure:
    def __init__(self, run: Run) -> None:
        self.run = run

    def plan(self, p: ProblemState) -> Remeasure | None:
        """The re-measure of baseline and best; None when there is nothing to compare
        (re-measure off, a failed or unmeasured side, or the best is the baseline)."""
        rounds = self.run.cfg.search.remeasure_rounds
        base, best = self.run.kernels.get(p.baseline_id), self.run.kernels.get(p.best_id or "")
        if (
            rounds <= 0
            or base is None
            or best is None
            or not base.passed
            or not best.passed
            or not base.latency_ms
            or not best.latency_ms
            or base.source == best.source
        ):
            return None
        origin = p.target.origin_source
        third = bool(origin) and origin not in (base.source, best.source)
        return Remeasure(
            sides=3 if third else 2,
            rounds=rounds,
            seed_base=run_seed_base(self.run.run_id, p.name),
            every_side=bool(origin),  # a campaign's run: each side's own status, as its item's measurement
        )

    def _side(self, p: ProblemState, side: int) -> tuple[str, str, str]:
        """(kernel id, language, source) of a side: the baseline, the best, the suite's baseline."""
        if side == 2:
            assert self.run.started is not None
            origin = p.target.origin_source
            kid = self.run.started.new_kernel_id(p.name, p.target.language, origin, "origin", p.name)
            return kid, p.target.language, origin
        k = self.run.kernels[(p.baseline_id, p.best_id or "")[side]]
        return k.kernel_id, k.language, k.source

    def next(self, p: ProblemState, cause: ev.Event) -> list[ev.Event]:
        assert p.remeasure is not None and self.run.started is not None
        slot = p.remeasure.next_slot()
        if slot is None:
            return self._done(p, cause)
        kid, language, source = self._side(p, slot.side)
        req = ev.ProfileRequested(
            **self.run.env(ev.ProfileRequested, "remeasure", p.name, slot.step, cause=cause),
            # the kernel it times again; a run recorded before kernels were content-addressed
            # gave each re-measure an id of its own
            kernel_id=kid
            if self.run.started.kernel_ids == "content"
            else ev.derive_event_id(self.run.run_id, "Kernel", "remeasure", p.name, slot.step),
            problem=p.name,
            device=p.target.device,
            language=language,
            source=source,
            purpose="remeasure",
            seed_offset=slot.seed_offset,
        )
        p.remeasure_slots[req.event_id] = slot
        return self.run.request(p, req)

    def profiled(self, e: ev.KernelProfiled) -> list[ev.Event]:
        p, released = self.run.resolve(e.request_id)
        slot = p.remeasure_slots.get(e.request_id) if p is not None else None
        if p is None or slot is None or p.remeasure is None or p.phase != Phase.REMEASURE:
            return released
        p.remeasure.record(slot, e.profile)
        return released + self.next(p, e)

    def _done(self, p: ProblemState, cause: ev.Event) -> list[ev.Event]:
        assert p.remeasure is not None
        base, best = self.run.kernels[p.baseline_id], self.run.kernels[p.best_id or ""]
        ids = [self._side(p, s)[0] for s in range(p.remeasure.sides)]
        b, k, *origin = p.remeasure.results(ids)
        c = compare(b, k, (base.latency_ms, best.latency_ms), (base.spread, best.spread))
        done = ev.ProblemRemeasured(
            **self.run.env(ev.ProblemRemeasured, p.name, cause=cause),
            problem=p.name,
            rounds=p.remeasure.rounds,
            seed_offsets=p.remeasure.seed_offsets,
            baseline=b,
            best=k,
            recorded_speedup=c.recorded_speedup,
            speedup=c.speedup,
            noise=c.noise,
            agrees=c.agrees,
            origin=origin[0] if origin else None,
        )
        return [done]
