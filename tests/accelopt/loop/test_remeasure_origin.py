"""A campaign's run times its item's origin in its own end-of-problem re-measure: a target
with `origin_source` (the suite's baseline, where the run starts from the item's best) gets
that kernel as a third side of the same interleaved rounds, and every side runs to its end,
so the campaign takes its item's measurement from the run's `ProblemRemeasured` instead of
profiling the same kernels again after the run (actors/runtime/item_measure.py). The
coordinator's pure core on the simulated world of sim.py (no LLM, no device)."""

from __future__ import annotations

import msgspec
import sim

from accelopt import catalog as c
from accelopt.config import build_config
from accelopt.coordinator import CoordinatorCore
from accelopt.kernel_id import kernel_id
from accelopt.profile import Profile
from replay.synthetic import drive_core

START = sim.BASE.replace("#define TILE 4\n", "#define TILE 8\n")  # the item's best so far
ROUNDS = 3


def _drive(origin: str, world: sim.World | None = None) -> list[c.Event]:
    """One problem, its baseline START (a campaign's run from its item's best), `origin` the
    suite's baseline ("" for a run of its own)."""
    world = world or sim.World()
    target = sim.problem("a")
    problem = target.problem
    baseline = msgspec.structs.replace(
        problem.baseline, sources=[msgspec.structs.replace(problem.baseline.sources[0], content=START)]
    )
    target = msgspec.structs.replace(
        target, problem=msgspec.structs.replace(problem, baseline=baseline), origin_source=origin
    )
    cfg = build_config(
        preset="quick",
        overrides=["memory.enabled=false", "search.iterations=1", f"search.remeasure_rounds={ROUNDS}"],
    )
    start = c.RunStarted(
        **world.env("RunStarted"), config=cfg.to_dict(), seed=0, targets=[target], kernel_ids="content"
    )
    world.started = start
    return drive_core(CoordinatorCore(sim.RUN, clock=lambda: 0.0), start, world.answer)


def _remeasure(log: list[c.Event]) -> tuple[list[c.ProfileRequested], c.ProblemRemeasured]:
    reqs = [e for e in log if isinstance(e, c.ProfileRequested) and e.purpose == "remeasure"]
    (done,) = [e for e in log if isinstance(e, c.ProblemRemeasured)]
    return reqs, done


def test_a_campaign_run_times_its_items_origin_in_the_same_rounds() -> None:
    log = _drive(sim.BASE)
    assert isinstance(log[-1], c.RunCompleted)
    reqs, done = _remeasure(log)
    best = next(e.source for e in reqs if e.source not in (START, sim.BASE))
    names = {START: "start", best: "best", sim.BASE: "origin"}
    sides = [names[r.source] for r in reqs]
    assert sides == ["start", "best", "origin", "origin", "best", "start", "start", "best", "origin"]
    offsets = [r.seed_offset for r in reqs]
    assert [offsets[i : i + 3] for i in range(0, 9, 3)] == [
        [o] * 3 for o in done.seed_offsets
    ]  # a round's seeds
    assert done.origin is not None and done.rounds == ROUNDS
    assert done.origin.kernel_id == kernel_id("a", "c", sim.BASE)  # the content id the campaign looks for
    assert done.origin.rounds_ms == [2.5] * ROUNDS and done.origin.status == "passed"  # 10 / TILE 4
    assert done.baseline.kernel_id == kernel_id("a", "c", START) and len(done.best.rounds_ms) == ROUNDS
    # its request names the kernel by content, like the run's own kernels
    assert {r.kernel_id for r in reqs if r.source == sim.BASE} == {done.origin.kernel_id}


def test_a_run_of_its_own_or_from_the_origin_times_two_sides() -> None:
    for origin in ("", START):  # a plain run; a campaign's first run (it starts from the origin)
        reqs, done = _remeasure(_drive(origin))
        assert len(reqs) == 2 * ROUNDS and {r.source for r in reqs} != {START, sim.BASE}
        assert done.origin is None


class StartFailsAgain(sim.World):
    """The kernel the run started from fails on the re-measure's fresh seeds."""

    def answer(self, e: c.Event) -> list[c.Event]:
        out = super().answer(e)
        if isinstance(e, c.ProfileRequested) and e.purpose == "remeasure" and e.source == START:
            prof = Profile(status="incorrect", device="cpu", log="mismatch at [3] on seed 700123")
            out = [msgspec.structs.replace(out[0], profile=prof)]
        return out


def test_a_campaign_runs_every_side_to_its_end() -> None:
    """Each side's own status, as the item's measurement: the start failing on fresh seeds
    ends only itself (a run of its own stops comparing once its baseline fails)."""
    reqs, done = _remeasure(_drive(sim.BASE, StartFailsAgain()))
    assert done.baseline.status == "incorrect" and len([r for r in reqs if r.source == START]) == 1
    assert done.origin is not None and len(done.origin.rounds_ms) == ROUNDS
    assert len(done.best.rounds_ms) == ROUNDS and done.speedup is None
    reqs, done = _remeasure(_drive("", StartFailsAgain()))
    assert len(reqs) == 1 and done.best.rounds_ms == []  # the comparison was lost: nothing more
