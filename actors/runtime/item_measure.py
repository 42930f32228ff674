"""A campaign's item measured at the end of one of its runs: the fields of a
`CampaignItemMeasured` (accelopt/catalog.py).

The suite's baseline (`origin`), the kernel the run started from (`start`: the item's best so
far, where it is not the baseline) and the run's best (`candidate`, where it is a new source)
are profiled together in-process on the device's hardware agent by the interleaved re-measure
protocol (accelopt/remeasure.py, as a run's own re-measure and `accelopt remeasure` are): in
rounds on fresh seeds, the order reversed every other round, so every side sees the same
machine conditions. An emulated device's kernels are compared by the cost model's estimate
(one round: it is deterministic). The item's speedup is origin over its best in these
rounds: a measurement, never a product of runs' gains.

Most run ends cost no profile of their own (issue 49: the measurement after each run took as
long as the run again, or three times a short one, while the device's next run waited):

- `from_run_remeasure`: a run of a campaign records its item's origin (`ProblemTarget.
  origin_source`), so its own end-of-problem re-measure times the suite's baseline beside
  its start and its best in the same interleaved rounds on fresh seeds, every side to its
  end (accelopt/run_remeasure.py). Where that event timed exactly the sides this
  measurement would, on the item's device and in as many rounds, its rounds are the
  measurement (`run_remeasure` names the event);
- `unchanged_since`: a run that found nothing new leaves the item's kernels as they were;
  where the item's last measurement timed exactly these (its baseline and the kernel the run
  started from), the item is not measured again and its figure stays that measurement's.

Otherwise (an emulated device, whose runs make no re-measure; a run its deadline cut before
its re-measure; a re-measure cut short) `measure_item` profiles the sides after the run.
`measure_after_run` (the campaign's run thread, actors/runtime/campaign_run.py) picks which.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable

from accelopt import catalog as ev
from accelopt.config import RunConfig
from accelopt.kernel_id import kernel_id
from accelopt.logging import get_logger
from accelopt.problem import Problem
from accelopt.profile import Profile, peak_fraction
from accelopt.remeasure import Remeasure, drive, first_line

log = get_logger(component="campaign")

SEED_BASE = 5_000_000  # above the search's (< 100,000) and a run's own re-measure's (700,000 + ...)


def seed_base(run_id: str) -> int:
    """The first round's seed offset: fresh seeds, distinct per run."""
    h = int(hashlib.sha256(f"item-measure\x1f{run_id}".encode()).hexdigest()[:6], 16)
    return SEED_BASE + 1_000_000 * (h % 1000)


def sides_to_measure(problem: Problem, start: str, candidate: str | None) -> list[tuple[str, str]]:
    """(role, source) per distinct source: the baseline first, then the start, then the candidate."""
    out = [("origin", problem.baseline.entry_file().content)]
    for role, src in (("start", start), ("candidate", candidate)):
        if src and all(src != s for _, s in out):
            out.append((role, src))
    return out


def _usable(side: ev.RemeasuredSide | None) -> bool:
    return side is not None and side.status in ("passed", "unmeasured") and bool(side.median_ms)


def _side_ids(problem: Problem, start: str, candidate: str | None) -> list[tuple[str, str]]:
    """(role, kernel id) of each side `measure_item` would profile."""
    language = problem.baseline.spec.language
    return [
        (role, kernel_id(problem.name, language, src))
        for role, src in sides_to_measure(problem, start, candidate)
    ]


def unchanged_since(
    problem: Problem, start: str, candidate: str | None, last: ev.CampaignItemMeasured | None
) -> bool:
    """The run brought no new kernel (its best is the kernel it started from, or the suite's
    baseline) and `last`, the item's last measurement, timed exactly the kernels it would
    time again, each with a figure: measuring them again would only re-draw their noise."""
    sides = _side_ids(problem, start, candidate)
    if last is None or last.error or any(role == "candidate" for role, _ in sides):
        return False
    timed = {s.kernel_id for s in (last.origin, last.start, last.candidate) if s is not None and _usable(s)}
    return all(kid in timed for _, kid in sides)


def _complete(side: ev.RemeasuredSide, rounds: int) -> bool:
    """A side with its every round, or one that failed by itself (its failure is its result)."""
    return len(side.rounds_ms) == rounds if side.status == "passed" else side.status != "unmeasured"


def from_run_remeasure(
    problem: Problem,
    *,
    start: str,
    candidate: str | None,
    remeasured: ev.ProblemRemeasured | None,
    rounds: int,
) -> dict | None:
    """The fields `measure_item` would give, taken from the run's own end-of-problem
    re-measure (`remeasured`, made on the item's device), where it timed exactly the sides
    the item needs (the suite's baseline, the run's start and its best, by content id) in
    `rounds` rounds, every side to its end; None where it did not (then measure after the
    run). Its seeds are fresh: no search profile uses a re-measure's offsets."""
    if remeasured is None or remeasured.rounds != max(1, rounds):
        return None
    timed = {
        s.kernel_id: s for s in (remeasured.baseline, remeasured.best, remeasured.origin) if s is not None
    }
    sides = _side_ids(problem, start, candidate)
    if {kid for _, kid in sides} != set(timed) or not all(
        _complete(s, remeasured.rounds) for s in timed.values()
    ):
        return None
    by_role = {role: timed[kid] for role, kid in sides}
    return {
        "method": "interleaved",
        "rounds": remeasured.rounds,
        "seed_offsets": list(remeasured.seed_offsets),
        "origin": by_role["origin"],
        "start": by_role.get("start"),
        "candidate": by_role.get("candidate"),
        "run_remeasure": remeasured.event_id,
    }


def estimated_side(kid: str, prof: Profile) -> ev.RemeasuredSide:
    """An emulated device's side: its estimate as its one round (status `unmeasured`)."""
    est = prof.estimated_ms
    if est is None:
        return ev.RemeasuredSide(kernel_id=kid, status=prof.status, log_head=first_line(prof.log))
    t_peak = (prof.estimate.t_peak_ms if prof.estimate else None) or prof.t_peak_ms
    return ev.RemeasuredSide(
        kernel_id=kid,
        status="unmeasured",
        rounds_ms=[est],
        median_ms=est,
        peak_fraction=peak_fraction(t_peak, est),
    )


def measure_item(
    agent,
    problem: Problem,
    *,
    run_id: str,
    start: str,
    candidate: str | None,
    rounds: int,
    timeout_s: float,
) -> dict:
    """The fields of the item's `CampaignItemMeasured` (but its run and item). `problem` is the
    suite's (its baseline the origin); `start` the source the run started from; `candidate`
    the run's best source (None: the run has none)."""
    from actors.roles.profiler import kernel_solution, offset_seeds

    sides = sides_to_measure(problem, start, candidate)
    language = problem.baseline.spec.language
    ids = [kernel_id(problem.name, language, src) for _, src in sides]

    def profile(side: int, offset: int) -> Profile:
        solution = kernel_solution(problem.name, ids[side], language, sides[side][1], problem.baseline)
        return agent.profile(problem, solution, seeds=offset_seeds(offset), timeout_s=timeout_s)

    base = seed_base(run_id)
    first = profile(0, base)
    if first.estimated_ms is not None:  # an emulated device: the cost model's estimates
        profiles = [first] + [profile(i, base) for i in range(1, len(sides))]
        results = [estimated_side(k, p) for k, p in zip(ids, profiles, strict=True)]
        method, offsets = "estimated", [base]
    else:
        # every side: the baseline alone (a run that started from it and found nothing new) is
        # measured too, and a side that fails ends only itself
        protocol = Remeasure(len(sides), max(1, rounds), base, every_side=True)
        slot = protocol.next_slot()  # round 0, the baseline: the profile just taken
        assert slot is not None and slot.side == 0
        protocol.record(slot, first)
        drive(protocol, lambda s: profile(s.side, s.seed_offset))
        results = protocol.results(ids)
        method = "interleaved"
        offsets = protocol.seed_offsets[: max(len(p) for p in protocol.profiles)]
    by_role = {role: r for (role, _), r in zip(sides, results, strict=True)}
    return {
        "method": method,
        "rounds": len(offsets),
        "seed_offsets": offsets,
        "origin": by_role["origin"],
        "start": by_role.get("start"),
        "candidate": by_role.get("candidate"),
    }


def measure_after_run(
    problem: Problem,
    *,
    scheduled: ev.CampaignRunScheduled,
    outcome: dict,
    remeasured: ev.ProblemRemeasured | None,
    start: str,
    cfg: RunConfig,
    last: ev.CampaignItemMeasured | None,
    note: Callable[[str], None],
) -> dict | None:
    """The item of run `scheduled` measured at its end (its `CampaignItemMeasured` fields): the
    suite's baseline (`problem`'s), the kernel the run started from (`start`) and the run's best
    (`outcome`, the run's `CampaignRunFinished` fields), taken from the run's own re-measure
    (`remeasured`) where it timed exactly these, else profiled now (`cfg`: the run's config).
    None for a run with nothing usable (failed, unserved, its baseline broken) and for one that
    brought no new kernel where the item's last measurement (`last`) timed the same ones: the
    item stays as it was. `note` is told which."""
    if outcome.get("gain") is None or outcome.get("unserved"):
        return None
    from hardware_agents.families import get_agent, profile_timeout_s

    s = scheduled
    rounds = cfg.search.remeasure_rounds or 1
    candidate = outcome.get("best_source") or None
    if unchanged_since(problem, start, candidate, last):
        assert last is not None
        note(
            f"run {s.run} ({s.item}) ended with no new kernel: its item is as its last "
            f"measurement ({last.run}) timed it, not measured again"
        )
        return None
    reused = from_run_remeasure(
        problem, start=start, candidate=candidate, remeasured=remeasured, rounds=rounds
    )
    if reused is not None:
        note(
            f"run {s.run} ({s.item}) ended: its item measured in the run's own re-measure (the suite's "
            f"baseline, the kernel it started from and its best: {reused['rounds']} interleaved "
            f"round{'s' if reused['rounds'] != 1 else ''} on fresh seeds)"
        )
        return reused
    note(
        f"run {s.run} ({s.item}) ended: measuring the item (the suite's baseline, the kernel it "
        f"started from and its best: {rounds} interleaved round{'s' if rounds != 1 else ''} on fresh seeds, "
        "or the cost model's estimates where the device is emulated)"
    )
    try:
        agent = get_agent(s.device)
    except Exception as e:
        return {"method": "interleaved", "rounds": 0, "error": f"{type(e).__name__}: {e}"[:500]}
    try:
        return measure_item(
            agent,
            problem,
            run_id=s.run,
            start=start,
            candidate=candidate,
            rounds=rounds,
            timeout_s=profile_timeout_s(s.device, cfg.profiling),
        )
    except Exception as e:
        log.warning("item measurement failed", run_id=s.run, error=repr(e))
        return {"method": "interleaved", "rounds": 0, "error": f"{type(e).__name__}: {e}"[:500]}
    finally:
        agent.close()
