"""A run's end-of-problem re-measure: the protocol of `accelopt.remeasure` over the baseline
and the best kernel, driven through the run's log: one `ProfileRequested` of purpose
"remeasure" at a time (so no two overlap), each answered by its `KernelProfiled`, and at the
end the `ProblemRemeasured` that compares them (the search loop then closes the problem)."""

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
        return Remeasure(sides=2, rounds=rounds, seed_base=run_seed_base(self.run.run_id, p.name))

    def next(self, p: ProblemState, cause: ev.Event) -> list[ev.Event]:
        assert p.remeasure is not None and self.run.started is not None
        slot = p.remeasure.next_slot()
        if slot is None:
            return self._done(p, cause)
        kid = (p.baseline_id, p.best_id or "")[slot.side]
        k = self.run.kernels[kid]
        req = ev.ProfileRequested(
            **self.run.env(ev.ProfileRequested, "remeasure", p.name, slot.step, cause=cause),
            # the kernel it times again; a run recorded before kernels were content-addressed
            # gave each re-measure an id of its own
            kernel_id=kid
            if self.run.started.kernel_ids == "content"
            else ev.derive_event_id(self.run.run_id, "Kernel", "remeasure", p.name, slot.step),
            problem=p.name,
            device=p.target.device,
            language=k.language,
            source=k.source,
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
        b, k = p.remeasure.results([base.kernel_id, best.kernel_id])
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
        )
        return [done]
