"""The kernels' own flow, as a decider over the run's events: each kernel proposed (a
baseline, an implementation of a plan, a fix) is profiled once; one that fails to compile,
run or check is sent to the fixer while fix rounds are left; its profile (or its proposal
again, for a kernel already known) lets the search loop (`accelopt.search_loop`) move on."""

from __future__ import annotations

import hashlib

from accelopt import catalog as ev
from accelopt.profile import KERNEL_FAILURES
from accelopt.search_loop import SearchLoop
from accelopt.search_state import KernelRec, Phase, ProblemState, Run, Step


class KernelFlow:
    def __init__(self, run: Run, loop: SearchLoop) -> None:
        self.run = run
        self.loop = loop
        self._order = 0

    def baselines(self, e: ev.RunStarted) -> list[ev.Event]:
        """Each problem's baseline, proposed by the coordinator in reply to RunStarted."""
        outs: list[ev.Event] = []
        for target in sorted(e.targets, key=lambda t: t.problem.name):
            p = ProblemState(target=target)
            self.run.problems[p.name] = p
            source = target.problem.baseline.entry_file().content
            kid = e.new_kernel_id(p.name, target.language, source, "baseline", p.name)
            p.baseline_id = kid
            outs.append(
                ev.KernelProposed(
                    **self.run.env(ev.KernelProposed, kid, cause=e),
                    kernel_id=kid,
                    problem=p.name,
                    iteration=0,
                    parent_id=None,
                    plan_id=None,
                    request_id=e.event_id,
                    language=target.language,
                    source=source,
                )
            )
        return outs

    def on_kernel_proposed(self, e: ev.KernelProposed, out: Step) -> list[ev.Event]:
        p = self.run.problems.get(e.problem)
        if p is None or e.iteration < p.iteration:
            return []  # unknown, or of an iteration already closed (its kernels may be forgotten)
        if e.kernel_id in p.proposed:
            if e.request_id not in p.pending:
                return []  # a copy of a proposal already folded (the baseline's too)
            return self._proposed_again(p, e)
        if e.kernel_id != p.baseline_id and e.request_id not in p.pending:
            return []  # a copy of a proposal already folded: its request is answered
        p.proposed.add(e.kernel_id)
        _, released = self.run.resolve(e.request_id)
        self._order += 1
        rec = KernelRec(
            e.kernel_id,
            e.problem,
            e.iteration,
            e.source,
            e.language,
            e.parent_id,  # its lineage as its proposal records it (a fix: its FixRequested's)
            e.plan_id,
            e.fix_of,
            e.fix_round,
            self._order,
        )
        self.run.kernels[e.kernel_id] = rec
        p.kernel_ids.append(e.kernel_id)
        if e.plan_id:
            p.plan_kernels.setdefault(e.plan_id, []).append(e.kernel_id)
        seed_offset = (
            int(hashlib.sha256(e.kernel_id.encode()).hexdigest()[:6], 16) % 100_000 if e.iteration else 0
        )
        req = ev.ProfileRequested(
            **self.run.env(ev.ProfileRequested, e.kernel_id, cause=e),
            kernel_id=e.kernel_id,
            problem=e.problem,
            device=p.target.device,
            language=e.language,
            source=e.source,
            purpose="baseline" if e.iteration == 0 and e.parent_id is None else "candidate",
            seed_offset=seed_offset,
        )
        return released + self.run.request(p, req)

    def _proposed_again(self, p: ProblemState, e: ev.KernelProposed) -> list[ev.Event]:
        """A kernel proposed again (its id is its content): the same kernel. Its first proposal
        owns it (its record: iteration, lineage, fix chain, its one profile); this proposal
        answers its request, is not profiled, and is a sample of its own plan too, as it was
        when each proposal was a kernel of its own, so the beam and the summaries do not
        depend on which of two plans came first (a kernel is one candidate, however many plans
        reached it: `select_beam` collapses it). A fix that returns a known kernel ends its
        chain; a kernel the search already let go of is not a candidate again."""
        _, released = self.run.resolve(e.request_id)
        if e.plan_id:
            samples = p.plan_kernels.setdefault(e.plan_id, [])
            if e.kernel_id not in samples:
                samples.append(e.kernel_id)
        return released + self.loop.maybe_advance(p, e)

    def on_kernel_profiled(self, e: ev.KernelProfiled, out: Step) -> list[ev.Event]:
        req = self.run.requests.get(e.request_id)
        if isinstance(req, ev.ProfileRequested) and req.purpose == "remeasure":
            return self.loop.remeasure_profiled(e)
        p, released = self.run.resolve(e.request_id)
        k = self.run.kernels.get(e.kernel_id)
        if p is None or k is None or k.profile is not None:
            return released
        k.profile = e.profile
        p.kernels_profiled += 1
        outs = list(released)
        if p.phase == Phase.BASELINE:
            return outs + self.loop.baseline_done(p, k, e)
        prof = e.profile
        if (
            prof.status in KERNEL_FAILURES
            and k.fix_round < self.run.cfg_at(k.iteration).search.fix_rounds
            and not self.run.stopping
        ):
            parent = self.run.kernels.get(k.parent_id) if k.parent_id else None
            fix = ev.FixRequested(
                **self.run.env(ev.FixRequested, k.kernel_id, cause=e),
                kernel_id=k.kernel_id,
                parent_id=k.parent_id,  # the fix stands in for the broken kernel: its lineage
                plan_id=k.plan_id,
                problem=p.name,
                iteration=k.iteration,
                fix_round=k.fix_round + 1,
                error_log=prof.log[-8000:],
                status=prof.status,
                language=k.language,
                device=p.target.device,
                source=k.source,
                parent_source=parent.source if parent else "",
            )
            outs += self.run.request(p, fix)
        return outs + self.loop.maybe_advance(p, e)
