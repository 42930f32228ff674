"""Synthetic run logs: the real coordinator core driven by a simulated world, for benchmarks
of the fold and the report, and for demos. Deterministic for a given seed.

The world answers like agents and profilers would: every LLM request gets an
`LLMCallCompleted` (messages, token usage, cost, latency) and its result; kernels are C
sources with two tunable constants whose values set the latency; some implementations do
not compile and go through the fixer; a few proposals fail to parse; memory retrievals
return insights learnt earlier in the run. Time advances with the simulated work.
"""

from __future__ import annotations

import random
import re
from collections import deque
from collections.abc import Callable, Sequence
from typing import Any

import msgspec

from accelopt import catalog as ev
from accelopt.config import build_config
from accelopt.coordinator import CoordinatorCore
from accelopt.problem import (
    AxisConst,
    Definition,
    Problem,
    Roofline,
    TensorSpec,
    Workload,
    one_file_solution,
)
from accelopt.profile import LatencyStats, Profile
from accelopt.records import ChatMessage, MemoryEntry, TokenUsage

SOURCE = """/* {name}: y = f(x), elementwise over N floats (synthetic). */
#include <stddef.h>

#define TILE {tile}    /* elements per work item */
#define UNROLL {unroll}  /* inner loop unroll factor */

void kernel(const float* x, float* y) {{
    #pragma omp parallel for schedule(static)
    for (size_t i0 = 0; i0 < N; i0 += TILE) {{
        size_t i1 = i0 + TILE < N ? i0 + TILE : N;
        #pragma GCC unroll UNROLL
        for (size_t i = i0; i < i1; i++) y[i] = x[i] * 0.5f + 1.0f;
    }}
}}
"""
SYSTEM = (
    "You are an expert performance engineer. Optimize the kernel below for the target device. "
    "Propose exactly one single-step optimization plan, or implement the plan you are given, "
    "returning the full kernel in one fenced code block. "
) * 4
PRICE_IN, PRICE_OUT = 2.5e-6, 10e-6  # USD per token
# simulated seconds an event's work advances the clock (agents and profilers work in parallel)
ADVANCE = {ev.LLMCallCompleted: 0.4, ev.KernelProfiled: 0.25, ev.MemoryRetrieved: 0.05}


def _target(name: str) -> ev.ProblemTarget:
    d = Definition(
        name=name,
        op_type="elementwise",
        axes={"N": AxisConst(value=1 << 20)},
        inputs={"x": TensorSpec(shape=["N"], dtype="float32")},
        outputs={"y": TensorSpec(shape=["N"], dtype="float32")},
        reference="def run(x):\n    return x * 0.5 + 1.0\n",
        x_roofline=Roofline(bytes_min="8*N"),
    )
    s = one_file_solution(name, SOURCE.format(name=name, tile=16, unroll=1), name=f"{name}_base")
    return ev.ProblemTarget(
        problem=Problem(definition=d, workload=Workload(uuid=f"w-{name}"), baseline=s),
        device="cpu",
        language="c",
        content_hash=name,
    )


def _knobs(src: str) -> tuple[int, int]:
    tile = re.search(r"#define TILE (\d+)", src)
    unroll = re.search(r"#define UNROLL (\d+)", src)
    return (int(tile.group(1)) if tile else 16, int(unroll.group(1)) if unroll else 1)


# the requests the synthetic LLM answers
_LLMRequest = ev.PlanRequested | ev.ImplementationRequested | ev.FixRequested | ev.SummaryRequested


class SyntheticWorld:
    """Answers the coordinator's requests and effects as agents and profilers would (see the
    module docstring); `answer` dispatches on the request's type (`_answers`)."""

    def __init__(self, run_id: str, seed: int, fail_rate: float, t0: float) -> None:
        self.run_id = run_id
        self.started: ev.RunStarted | None = None  # the run's start: its rule names the kernels
        self.rng = random.Random(seed)
        self.fail_rate = fail_rate
        self.now = t0
        self.entries: list[ev.RetrievedInsight] = []
        self.optimum: dict[str, tuple[int, int]] = {}  # problem -> (tile, unroll) with the best latency
        self._answers: dict[type[ev.Event], Callable[..., list[ev.Event]]] = ev.dispatch_table(
            ev.on(ev.MemoryRequested, self._retrieve),
            ev.on(ev.PlanRequested, self._plan),
            ev.on(ev.ImplementationRequested, self._implement),
            ev.on(ev.FixRequested, self._fix),
            ev.on(ev.ProfileRequested, self._profile),
            ev.on(ev.SummaryRequested, self._summarize),
            ev.on(ev.MemoryEntryAdded, self._learn),
        )

    def env(self, kind: type[ev.Event], *key: object) -> ev.Envelope:
        # ts is stamped when the event enters the log (see `synthetic_run`)
        return ev.envelope(kind, self.run_id, *key, ts=0.0)

    def llm(self, req: ev.Event, prompt: str, response: str) -> ev.LLMCallCompleted:
        role = ev.ROLE_OF_REQUEST[type(req)]
        p_tok = 400 + len(prompt) // 4 + self.rng.randint(0, 200)
        c_tok = 60 + len(response) // 4 + self.rng.randint(0, 40)
        # an implementation takes longest (the whole kernel, after the plan)
        latency = 1.0 + self.rng.random() * (6.0 if type(req) is ev.ImplementationRequested else 3.0)
        return ev.LLMCallCompleted(
            **self.env(ev.LLMCallCompleted, req.event_id),
            role=role,
            request_id=req.event_id,
            model="openai/gpt-4o-mini",
            params={"temperature": 1.0},
            messages=[ChatMessage(role="system", content=SYSTEM), ChatMessage(role="user", content=prompt)],
            response=response,
            usage=TokenUsage(prompt_tokens=p_tok, completion_tokens=c_tok),
            cost_usd=p_tok * PRICE_IN + c_tok * PRICE_OUT,
            latency_s=latency,
            content_hash=req.event_id[:16],
            finish_reason="stop",
        )

    def kernel_id(self, request: ev.ImplementationRequested | ev.FixRequested, source: str) -> str:
        """The id the run gives the kernel `request` got back: the rule its RunStarted says."""
        assert self.started is not None
        return self.started.new_kernel_id(request.problem, request.language, source, request.event_id)

    def latency(self, problem: str, src: str) -> float:
        tile, unroll = _knobs(src)
        best_t, best_u = self.optimum.setdefault(
            problem, (self.rng.choice([1024, 2048, 4096]), self.rng.choice([8, 16]))
        )
        dist = abs(tile.bit_length() - best_t.bit_length()) + 0.5 * abs(
            unroll.bit_length() - best_u.bit_length()
        )
        return 1.0 * (1.0 + 0.35 * dist) * (1.0 + 0.02 * self.rng.random())

    def answer(self, e: ev.Event) -> list[ev.Event]:
        """What the world says to `e` (nothing to a type it does not answer)."""
        handler = self._answers.get(type(e))
        return handler(e) if handler is not None else []

    # --- the answers, one per request type --------------------------------------------------

    def _retrieve(self, e: ev.MemoryRequested) -> list[ev.Event]:
        picked = self.rng.sample(self.entries, min(len(self.entries), 8))
        return [
            ev.MemoryRetrieved(
                **ev.envelope(ev.MemoryRetrieved, self.run_id, ts=0.0, event_id=e.result_id),
                problem=e.problem,
                iteration=e.iteration,
                candidate_id=e.candidate_id,
                query=e.candidate_source[:400],
                entries=picked,
            )
        ]

    def _plan(self, e: ev.PlanRequested) -> list[ev.Event]:
        rng = self.rng
        tile, unroll = _knobs(e.candidate_source)
        up = rng.random() < 0.7
        if rng.random() < 0.6:
            what, old, new = "TILE", tile, tile * 2 if up else max(1, tile // 2)
        else:
            what, old, new = "UNROLL", unroll, unroll * 2 if up else max(1, unroll // 2)
        step = f"{what} {old} -> {new}"
        plan = (
            f"**Retune {what}**\nChange `{what}` and leave everything else unchanged; the profile shows "
            f"the kernel is memory bound.\nCHANGE: {step}"
        )
        call = self.llm(e, e.candidate_source, plan)
        if rng.random() < 0.02:
            return self._answer(e, call, ev.ProposalFailed, stage="plan", reason="no plan in the response")
        return self._answer(e, call, ev.PlanProposed, candidate_id=e.candidate_id, plan=plan)

    def _implement(self, e: ev.ImplementationRequested) -> list[ev.Event]:
        what, change = e.plan.rsplit("CHANGE: ", 1)[1].split(" ", 1)
        value = int(change.split("-> ")[1])
        src = re.sub(rf"#define {what} \d+", f"#define {what} {value}", e.candidate_source)
        if self.rng.random() < self.fail_rate:
            src = src.replace("size_t i1", "size_t i1 = ;", 1)  # does not compile
        return self._proposed(e, self.llm(e, e.plan + e.candidate_source, src), src, parent_id=e.candidate_id)

    def _fix(self, e: ev.FixRequested) -> list[ev.Event]:
        src = e.source if self.rng.random() < 0.3 else e.source.replace("size_t i1 = ;", "size_t i1", 1)
        call = self.llm(e, e.error_log + e.source, src)
        # as the fixer: the lineage its request carries
        return self._proposed(e, call, src, parent_id=e.parent_id, fix_of=e.kernel_id, fix_round=e.fix_round)

    def _proposed(
        self,
        e: ev.ImplementationRequested | ev.FixRequested,
        call: ev.LLMCallCompleted,
        src: str,
        *,
        parent_id: str | None,
        fix_of: str | None = None,
        fix_round: int = 0,
    ) -> list[ev.Event]:
        """The LLM's call and the kernel it answered `e` with (C source `src`)."""
        return self._answer(
            e,
            call,
            ev.KernelProposed,
            kernel_id=self.kernel_id(e, src),
            parent_id=parent_id,
            plan_id=e.plan_id,
            language="c",
            source=src,
            fix_of=fix_of,
            fix_round=fix_round,
        )

    def _answer(
        self, e: _LLMRequest, call: ev.LLMCallCompleted, kind: type[ev.Event], **fields: Any
    ) -> list[ev.Event]:
        """The LLM's call and the `kind` event it answered request `e` with: `fields`, and the
        request's problem and iteration, the request and the call named."""
        named: dict[str, Any] = {
            "problem": e.problem,
            "iteration": e.iteration,
            "request_id": e.event_id,
            "llm_call_id": call.event_id,
        }
        return [call, kind(**self.env(kind, e.event_id), **named, **fields)]

    def _profile(self, e: ev.ProfileRequested) -> list[ev.Event]:
        return [
            ev.KernelProfiled(
                **self.env(ev.KernelProfiled, e.event_id),
                kernel_id=e.kernel_id,
                problem=e.problem,
                device="cpu",
                request_id=e.event_id,
                profile=self._measure(e),
            )
        ]

    def _measure(self, e: ev.ProfileRequested) -> Profile:
        """A broken kernel does not compile; the others run at the latency their knobs give."""
        if "i1 = ;" in e.source:
            return Profile(
                status="compile_error",
                device="cpu",
                log="kernel.c:10:25: error: expected expression before ';' token",
            )
        lat = self.latency(e.problem, e.source)
        return Profile(
            status="passed",
            device="cpu",
            t_peak_ms=0.12,
            peak_fraction=0.12 / lat,
            bound="memory",
            latency=LatencyStats(samples_ms=[lat] * 5, median_ms=lat, min_ms=lat, max_ms=lat, spread=0.0),
            counters={"achieved_gbs": 8.4 / lat},
        )

    def _summarize(self, e: ev.SummaryRequested) -> list[ev.Event]:
        title = f"**{'Retune' if e.positive else 'Undo'} the tile size**"
        text = "Larger tiles amortise the loop overhead; past the cache size they stop helping."
        call = self.llm(e, e.slow_source + e.fast_source, title + "\n" + text)
        return self._answer(e, call, ev.InsightSummarized, title=title, text=text)

    def _learn(self, e: ev.MemoryEntryAdded) -> list[ev.Event]:
        """Later retrievals may return what the run learnt (no answer on the log)."""
        m: MemoryEntry = e.entry
        self.entries.append(
            ev.RetrievedInsight(
                entry_id=m.id,
                problem=m.problem,
                device=m.device,
                language=m.language,
                speedup=m.speedup,
                title=m.title,
                text=m.text,
                score=0.5 + 0.5 * self.rng.random(),
            )
        )
        return []


def synthetic_run(
    *,
    run_id: str = "synthetic",
    problems: int = 2,
    preset: str = "quick",
    overrides: tuple[str, ...] = (),
    seed: int = 0,
    fail_rate: float = 0.15,
    max_events: int | None = None,
    t0: float = 1_700_000_000.0,
    parent_run: str | None = None,
    fork_iteration: int | None = None,
    kernel_ids: ev.KernelIds = "content",
) -> list[ev.Event]:
    """A complete run log (or its first `max_events` events) of `problems` synthetic problems;
    `kernel_ids="request"` names its kernels as a run recorded before kernels were
    content-addressed did."""
    cfg = build_config(preset=preset, overrides=["memory.enabled=true", f"seed={seed}", *overrides])
    world = SyntheticWorld(run_id, seed, fail_rate, t0)
    core = CoordinatorCore(run_id, clock=lambda: world.now)
    start = ev.RunStarted(
        **ev.envelope(ev.RunStarted, run_id, ts=t0),
        config=cfg.to_dict(),
        seed=seed,
        targets=[_target(f"op{i:02d}") for i in range(problems)],
        parent_run=parent_run,
        fork_iteration=fork_iteration,
        kernel_ids=kernel_ids,
    )
    world.started = start

    def stamp(e: ev.Event) -> ev.Event:  # the simulated clock advances with the work an event stands for
        world.now += ADVANCE.get(type(e), 0.002)
        return e if e is start or e.ts == world.now else msgspec.structs.replace(e, ts=world.now)

    return drive_core(core, start, world.answer, admit=stamp, max_events=max_events)


def drive_core(
    core: CoordinatorCore,
    start: ev.Event,
    answer: Callable[[ev.Event], list[ev.Event]],
    *,
    pick: Callable[[Sequence[ev.Event]], int] | None = None,
    admit: Callable[[ev.Event], ev.Event] | None = None,
    on_output: Callable[[ev.Event], None] | None = None,
    max_events: int | None = None,
    max_steps: int | None = None,
) -> list[ev.Event]:
    """The loop of every simulated run (synthetic logs, the core's tests): step the core over
    `start` and the world's answers to its outputs and effects until the run completes.

    `pick` chooses the next event of the inbox (first in, first out by default; a test
    shuffles), `admit` sees (and may restamp) each event before the core does, `on_output`
    each event the core emits. The log is the events in the order the core saw and made them."""
    log: list[ev.Event] = []
    inbox: deque[ev.Event] = deque([start])
    steps = 0
    while inbox and not core.finished and (max_steps is None or steps < max_steps):
        steps += 1
        if pick is None:
            e = inbox.popleft()
        else:
            i = pick(inbox)
            e = inbox[i]
            del inbox[i]
        if admit is not None:
            e = admit(e)
        log.append(e)
        if max_events is not None and len(log) >= max_events:
            break
        result = core.step(e)
        for o in result.outputs:
            log.append(o)
            if on_output is not None:
                on_output(o)
            inbox.extend(answer(o))
        for eff in result.effects:
            inbox.extend(answer(eff))
        if isinstance(e, ev.RunCompleted):
            break
    return log[:max_events] if max_events is not None else log
