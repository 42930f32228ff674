"""The search loop: a problem's iterations, as a decider over the run's events.

Per problem: the baseline's profile closes iteration 0; each later iteration plans from every
beam candidate (after a memory retrieval when the memory is on), implements each plan,
profiles (and fixes) each kernel, and once nothing of it is pending selects the beam
(`BeamSelected`), asks for the summaries of its best pairs and completes (`IterationCompleted`);
after the last one the problem's baseline and best are re-measured (`RunRemeasure`) and the
run completes when every problem is done. The phases are `Phase`; the kernels' own flow
(proposals, profiles, fixes) is `accelopt.kernel_flow`. The handlers return the events
decided; what they change is the run's state (`Run`)."""

from __future__ import annotations

import msgspec

from accelopt import catalog as ev
from accelopt.beam_policy import Pair, plan_pair, select_beam, select_summaries
from accelopt.records import MemoryEntry, mark_estimated
from accelopt.run_remeasure import RunRemeasure
from accelopt.search_state import KernelRec, Phase, ProblemState, Run, Step, kept_kernels


class SearchLoop:
    def __init__(self, run: Run) -> None:
        self.run = run
        self.remeasure = RunRemeasure(run)

    def remeasure_profiled(self, e: ev.KernelProfiled) -> list[ev.Event]:
        """A re-measure's profile: the next one, or the problem's end."""
        return self._remeasured(self.remeasure.profiled(e))

    def _remeasured(self, outs: list[ev.Event]) -> list[ev.Event]:
        done = outs[-1] if outs and isinstance(outs[-1], ev.ProblemRemeasured) else None
        if done is not None:
            outs = outs + self.problem_done(self.run.problems[done.problem], done)
        return outs

    def baseline_done(self, p: ProblemState, k: KernelRec, cause: ev.Event) -> list[ev.Event]:
        prof = k.profile
        assert prof is not None
        usable = prof.status == "passed" or prof.status == "unmeasured"
        p.beam = [k.kernel_id] if usable else []
        p.best_id = k.kernel_id
        note = "" if usable else f"baseline {prof.status}: nothing to optimize from"
        return [self._iteration_completed(p, 0, cause, note=note)]

    def _iteration_completed(
        self, p: ProblemState, iteration: int, cause: ev.Event, note: str = ""
    ) -> ev.Event:
        best = self.run.kernels.get(p.best_id) if p.best_id else None
        return ev.IterationCompleted(
            **self.run.env(ev.IterationCompleted, p.name, iteration, cause=cause),
            problem=p.name,
            iteration=iteration,
            best_kernel_id=p.best_id or "",
            best_latency_ms=best.latency_ms if best and best.passed else None,
            best_pct_peak=best.profile.peak_fraction if best and best.passed and best.profile else None,
            kernels_profiled=p.kernels_profiled,
            note=note,
            best_estimated_ms=best.estimated_ms if best else None,
            best_estimated_pct_peak=(
                best.profile.estimate.peak_fraction
                if best and best.estimated_ms is not None and best.profile and best.profile.estimate
                else None
            ),
            kept=kept_kernels(p.baseline_id, p.best_id, p.beam),  # decided here, once
        )

    def on_iteration_completed(self, e: ev.IterationCompleted, out: Step) -> list[ev.Event]:
        p = self.run.problems[e.problem]
        if e.iteration <= p.completed_through:
            return []
        p.completed_through = e.iteration
        self._forget_left_behind(p, set(e.kept or ()))
        more = (
            e.iteration < self.run.cfg.search.iterations and p.beam and not self.run.stopping and not e.note
        )
        if more:
            p.iteration = e.iteration + 1
            p.phase = Phase.SEARCH
            p.plan_kernels.clear()
            p.plan_candidate.clear()
            return [
                ev.IterationStarted(
                    **self.run.env(ev.IterationStarted, p.name, p.iteration, cause=e),
                    problem=p.name,
                    iteration=p.iteration,
                    beam=list(p.beam),
                )
            ]
        p.remeasure = self.remeasure.plan(p)
        if p.remeasure is not None:
            p.phase = Phase.REMEASURE
            return self._remeasured(self.remeasure.next(p, e))
        return self.problem_done(p, e)

    def _forget_left_behind(self, p: ProblemState, keep: set[str]) -> None:
        """Drop the problem's kernels outside `keep`, what its IterationCompleted keeps (its
        baseline, best and beam): no later decision reads them (a late result for one is
        ignored, as for any kernel already profiled), and keeping every kernel's source would
        grow without bound."""
        for kid in p.kernel_ids:
            if kid not in keep:
                self.run.kernels.pop(kid, None)
        p.kernel_ids = [k for k in p.kernel_ids if k in keep]
        p.plans_drawn = {k: n for k, n in p.plans_drawn.items() if k in keep}

    def problem_done(self, p: ProblemState, cause: ev.Event) -> list[ev.Event]:
        p.phase = Phase.DONE
        if all(q.phase == Phase.DONE for q in self.run.problems.values()):
            return [
                ev.RunCompleted(
                    **self.run.env(ev.RunCompleted, cause=cause),
                    reason=self.run.stopping or "completed",
                    best_kernel_ids={q.name: q.best_id or "" for q in self.run.problems.values()},
                )
            ]
        return []

    def on_iteration_started(self, e: ev.IterationStarted, out: Step) -> list[ev.Event]:
        p = self.run.problems[e.problem]
        if e.iteration <= p.started_through:
            return []
        p.started_through = e.iteration
        outs: list[ev.Event] = []
        mem = self.run.cfg_at(e.iteration).memory
        for cand_id in e.beam:
            cand = self.run.kernels[cand_id]
            if mem.enabled and mem.top_m > 0:
                result_id = ev.derive_event_id(
                    self.run.run_id, "MemoryRetrieved", p.name, e.iteration, cand_id
                )
                p.pending.add(result_id)
                self.run.request_problem[result_id] = p.name
                d = p.target.problem.definition
                out.effects.append(
                    ev.MemoryRequested(
                        **self.run.env(ev.MemoryRequested, result_id, cause=e),
                        result_id=result_id,
                        problem=p.name,
                        op_type=d.op_type,
                        device=p.target.device,
                        language=p.target.language,
                        iteration=e.iteration,
                        candidate_id=cand_id,
                        candidate_source=cand.source,
                        memory=msgspec.to_builtins(mem),
                        expect_entry_ids=self._all_memory_ids(),
                    )
                )
            else:
                outs += self._plan_requests(p, e.iteration, cand, [], None, e)
        return outs + self.maybe_advance(p, e)

    def _all_memory_ids(self) -> list[str]:
        return [i for q in self.run.problems.values() for i in q.memory_ids]

    def _plan_requests(
        self,
        p: ProblemState,
        iteration: int,
        cand: KernelRec,
        insights: list[ev.RetrievedInsight],
        memory_event_id: str | None,
        cause: ev.Event,
    ) -> list[ev.Event]:
        if self.run.stopping:
            return []
        outs: list[ev.Event] = []
        drawn = p.plans_drawn.get(cand.kernel_id, 0)
        n = self.run.cfg_at(iteration).search.plans_per_candidate
        p.plans_drawn[cand.kernel_id] = drawn + n
        for j in range(n):
            req = ev.PlanRequested(
                **self.run.env(ev.PlanRequested, p.name, iteration, cand.kernel_id, j, cause=cause),
                problem=p.name,
                iteration=iteration,
                candidate_id=cand.kernel_id,
                sample_index=drawn + j,
                language=p.target.language,
                device=p.target.device,
                candidate_source=cand.source,
                candidate_profile=cand.profile,
                insights=insights,
                memory_event_id=memory_event_id,
            )
            outs += self.run.request(p, req)
        return outs

    def on_memory_retrieved(self, e: ev.MemoryRetrieved, out: Step) -> list[ev.Event]:
        p, _ = self.run.resolve(e.event_id)
        if p is None or e.candidate_id not in self.run.kernels:
            return []
        outs = self._plan_requests(
            p, e.iteration, self.run.kernels[e.candidate_id], list(e.entries), e.event_id, e
        )
        return outs + self.maybe_advance(p, e)

    def on_plan_proposed(self, e: ev.PlanProposed, out: Step) -> list[ev.Event]:
        p, released = self.run.resolve(e.request_id)
        if p is None:
            return released
        outs = list(released)
        cand = self.run.kernels.get(e.candidate_id)
        p.plan_candidate[e.event_id] = e.candidate_id
        p.plan_kernels.setdefault(e.event_id, [])
        if cand is not None and not self.run.stopping:
            for k in range(self.run.cfg_at(e.iteration).search.samples_per_plan):
                req = ev.ImplementationRequested(
                    **self.run.env(ev.ImplementationRequested, e.event_id, k, cause=e),
                    problem=p.name,
                    iteration=e.iteration,
                    candidate_id=e.candidate_id,
                    plan_id=e.event_id,
                    sample_index=k,
                    language=p.target.language,
                    device=p.target.device,
                    plan=e.plan,
                    candidate_source=cand.source,
                )
                outs += self.run.request(p, req)
        return outs + self.maybe_advance(p, e)

    def on_proposal_failed(self, e: ev.ProposalFailed, out: Step) -> list[ev.Event]:
        p, released = self.run.resolve(e.request_id)
        if p is None:
            return released
        return released + self.maybe_advance(p, e)

    def on_insight_summarized(self, e: ev.InsightSummarized, out: Step) -> list[ev.Event]:
        req = self.run.requests.get(e.request_id)
        p, released = self.run.resolve(e.request_id)
        if p is None:
            return released
        outs = list(released)
        if not e.noop and isinstance(req, ev.SummaryRequested):
            entry_id = ev.derive_event_id(self.run.run_id, "MemoryEntry", self.run.run_id, e.request_id)
            p.memory_ids.append(entry_id)
            d = p.target.problem.definition
            entry = MemoryEntry(
                id=entry_id,
                source_run=self.run.run_id,
                problem=p.name,
                op_type=d.op_type,
                device=p.target.device,
                language=p.target.language,
                slow_kernel=req.slow_source,
                fast_kernel=req.fast_source,
                speedup=req.speedup,
                title=e.title,
                created_at=e.ts,
                positive=req.positive,
                text=mark_estimated(e.text) if req.estimated else e.text,
            )
            outs.append(
                ev.MemoryEntryAdded(**self.run.env(ev.MemoryEntryAdded, entry_id, cause=e), entry=entry)
            )
        return outs + self.maybe_advance(p, e)

    def maybe_advance(self, p: ProblemState, cause: ev.Event) -> list[ev.Event]:
        """When nothing of the current iteration is pending, move to its next phase."""
        if p.pending:
            return []
        if p.phase == Phase.SEARCH:
            return self._select_and_summarize(p, cause)
        if p.phase == Phase.SUMMARIZE:
            p.phase = Phase.CLOSING
            return [self._iteration_completed(p, p.iteration, cause)]
        return []

    def _beam_member(self, kernel_id: str) -> ev.BeamMember:
        k = self.run.kernels[kernel_id]
        return ev.BeamMember(
            kernel_id=kernel_id,
            latency_ms=k.latency_ms or 0.0,
            peak_fraction=k.profile.peak_fraction if k.profile else None,
            estimated_ms=k.estimated_ms,
        )

    def _plan_samples(self, p: ProblemState) -> dict[str, list[KernelRec]]:
        """This iteration's kernels per plan, fix chains included (only the final attempt of a
        chain can pass, and it counts as a sample of the plan)."""
        return {
            plan: [self.run.kernels[k] for k in ks if k in self.run.kernels]
            for plan, ks in sorted(p.plan_kernels.items())
        }

    def _select_and_summarize(self, p: ProblemState, cause: ev.Event) -> list[ev.Event]:
        s = self.run.cfg_at(p.iteration).search
        samples = self._plan_samples(p)
        beam_now = [self.run.kernels[k].scored() for k in p.beam]
        new_beam = select_beam(
            beam_now, [[k.scored() for k in ks] for ks in samples.values()], s.beam_width, elitist=s.elitist
        )
        p.beam = [b.kernel_id for b in new_beam]
        best = min(
            (self.run.kernels[b] for b in p.beam + ([p.best_id] if p.best_id else [])),
            key=lambda k: k.scored().rank_key,
        )
        p.best_id = best.kernel_id
        outs: list[ev.Event] = [
            ev.BeamSelected(
                **self.run.env(ev.BeamSelected, p.name, p.iteration, cause=cause),
                problem=p.name,
                iteration=p.iteration,
                beam=[self._beam_member(k) for k in p.beam],
                best_kernel_id=p.best_id,
            )
        ]
        p.phase = Phase.SUMMARIZE
        if self.run.stopping:
            return outs + self.maybe_advance(p, cause)
        pairs = self._plan_pairs(p, samples)
        picks = select_summaries(
            pairs,
            positive_threshold=s.summary_positive_threshold,
            negative_threshold=s.summary_negative_threshold,
            max_positive=s.summary_max_positive,
            max_total=s.summary_max_total,
        )
        for pick in picks:
            p.summarized.add(frozenset((pick.slow_id, pick.fast_id)))
            slow, fast = self.run.kernels[pick.slow_id], self.run.kernels[pick.fast_id]
            req = ev.SummaryRequested(
                **self.run.env(
                    ev.SummaryRequested, p.name, p.iteration, pick.slow_id, pick.fast_id, cause=cause
                ),
                problem=p.name,
                iteration=p.iteration,
                slow_kernel_id=pick.slow_id,
                fast_kernel_id=pick.fast_id,
                speedup=pick.speedup,
                positive=pick.positive,
                language=p.target.language,
                device=p.target.device,
                slow_source=slow.source,
                fast_source=fast.source,
                estimated=pick.estimated,
            )
            outs += self.run.request(p, req)
        return outs + self.maybe_advance(p, cause)

    def _plan_pairs(self, p: ProblemState, samples: dict[str, list[KernelRec]]) -> list[Pair]:
        """The (parent, best child) pair of each plan whose parent has a figure, each pair of
        kernels once per problem (two plans of one candidate that reached one kernel, or a
        kernel reached again later, teach nothing new)."""
        s = self.run.cfg_at(p.iteration).search
        pairs: list[Pair] = []
        seen = set(p.summarized)
        for plan_id, ks in samples.items():
            parent = self.run.kernels.get(p.plan_candidate.get(plan_id, ""))
            if parent is None:
                continue
            if parent.passed and parent.latency_ms:
                pair = plan_pair(
                    parent.kernel_id,
                    parent.latency_ms,
                    [k.scored() for k in ks],
                    parent.spread,
                    noise_aware=s.summary_noise_margin,
                )
            elif parent.estimated_ms:  # estimated pairs: a cost model's figures on both sides
                pair = plan_pair(
                    parent.kernel_id,
                    parent.estimated_ms,
                    [k.scored() for k in ks],
                    noise_aware=False,
                    estimated=True,
                )
            else:
                continue
            # two plans of one candidate that reached one kernel make one pair, learnt once
            if pair and frozenset((pair.parent_id, pair.child_id)) not in seen:
                seen.add(frozenset((pair.parent_id, pair.child_id)))
                pairs.append(pair)
        return pairs
