"""A campaign's item measurement costs no profile where the run already timed the same kernels
(actors/runtime/item_measure.py): the run's own end-of-problem re-measure is taken where it
timed exactly the sides the item needs (by content id), in as many rounds, every side to its
end; a run that brought no new kernel is not measured again where the item's last
measurement timed the same ones. Anything else is measured after the run, as before. The
real driver's use of these is in test_campaign_figures.py; the coordinator's third side in
tests/accelopt/loop/test_remeasure_origin.py."""

from __future__ import annotations

import msgspec
import pytest

import suites
from accelopt import catalog as c
from accelopt.kernel_id import kernel_id
from actors.runtime.item_measure import from_run_remeasure, unchanged_since

PROBLEM = suites.get_problem("cpu_v2/silu")
ORIGIN = PROBLEM.baseline.entry_file().content
START = ORIGIN.replace("#define EXP_IMPL 1", "#define EXP_IMPL 2")
BEST = START.replace("#define VEC 4", "#define VEC 8")
ROUNDS = 3


def kid(src: str) -> str:
    return kernel_id("silu", "c", src)


def side(src: str, ms: float, *, rounds: int = ROUNDS, status: str = "passed") -> c.RemeasuredSide:
    timed = [ms] * rounds if status == "passed" else []
    return c.RemeasuredSide(
        kernel_id=kid(src),
        status=status,
        rounds_ms=timed,
        median_ms=ms if timed else None,
        peak_fraction=0.01,
    )


def remeasured(baseline: c.RemeasuredSide, best: c.RemeasuredSide, origin: c.RemeasuredSide | None = None):
    return c.ProblemRemeasured(
        **c.envelope(c.ProblemRemeasured, "r002", "silu", ts=1.0),
        problem="silu",
        rounds=ROUNDS,
        seed_offsets=[700_001, 710_001, 720_001],
        baseline=baseline,
        best=best,
        origin=origin,
    )


def test_a_repeat_runs_re_measure_with_the_origin_is_its_items_measurement() -> None:
    rm = remeasured(side(START, 5.0), side(BEST, 4.0), side(ORIGIN, 12.0))
    m = from_run_remeasure(PROBLEM, start=START, candidate=BEST, remeasured=rm, rounds=ROUNDS)
    assert m is not None
    assert (m["origin"], m["start"], m["candidate"]) == (rm.origin, rm.baseline, rm.best)
    assert m["method"] == "interleaved" and m["rounds"] == ROUNDS and m["seed_offsets"] == rm.seed_offsets
    assert m["run_remeasure"] == rm.event_id  # the event says whose rounds these are
    # the event it becomes decodes as the catalog writes it
    e = c.CampaignItemMeasured(
        **c.envelope(c.CampaignItemMeasured, "camp", "r002", ts=2.0), run="r002", item="cpu_v2/silu@cpu", **m
    )
    assert msgspec.msgpack.decode(msgspec.msgpack.encode(e), type=c.CampaignItemMeasured) == e


def test_a_first_runs_re_measure_is_its_items_measurement() -> None:
    """A run from the suite's baseline: its re-measure's baseline is the origin."""
    rm = remeasured(side(ORIGIN, 12.0), side(BEST, 4.0))
    m = from_run_remeasure(PROBLEM, start=ORIGIN, candidate=BEST, remeasured=rm, rounds=ROUNDS)
    assert m is not None and m["origin"] == rm.baseline and m["candidate"] == rm.best and m["start"] is None


def test_a_failed_side_is_its_own_result() -> None:
    rm = remeasured(side(START, 5.0), side(BEST, 0, status="incorrect"), side(ORIGIN, 12.0))
    m = from_run_remeasure(PROBLEM, start=START, candidate=BEST, remeasured=rm, rounds=ROUNDS)
    assert m is not None and m["candidate"].status == "incorrect"


@pytest.mark.parametrize(
    "why, rm, rounds",
    [
        ("no re-measure (an emulated device, a run its deadline cut)", None, ROUNDS),
        (
            "the origin not in its rounds (a run recorded without it)",
            remeasured(side(START, 5.0), side(BEST, 4.0)),
            ROUNDS,
        ),
        (
            "other rounds than the item's",
            remeasured(side(START, 5.0), side(BEST, 4.0), side(ORIGIN, 12.0)),
            5,
        ),
        (
            "another kernel than the run's best",
            remeasured(side(START, 5.0), side(BEST.replace("VEC 8", "VEC 16"), 4.0), side(ORIGIN, 12.0)),
            ROUNDS,
        ),
        (
            "a side cut short (a comparison lost, not its own failure)",
            remeasured(side(START, 5.0), side(BEST, 4.0), side(ORIGIN, 12.0, rounds=1)),
            ROUNDS,
        ),
    ],
)
def test_anything_else_is_measured_after_the_run(why: str, rm, rounds: int) -> None:
    assert from_run_remeasure(PROBLEM, start=START, candidate=BEST, remeasured=rm, rounds=rounds) is None, why


def _last(**sides: c.RemeasuredSide) -> c.CampaignItemMeasured:
    return c.CampaignItemMeasured(
        **c.envelope(c.CampaignItemMeasured, "camp", "r001", ts=1.0),
        run="r001",
        item="cpu_v2/silu@cpu",
        method="interleaved",
        rounds=ROUNDS,
        **sides,
    )


def test_a_run_with_no_new_kernel_is_not_measured_again() -> None:
    last = _last(origin=side(ORIGIN, 12.0), candidate=side(START, 5.0))  # the run that took START
    # its best is its start, or the suite's baseline: the item's kernels are as `last` timed them
    for candidate in (START, None, ORIGIN):
        assert unchanged_since(PROBLEM, START, candidate, last)
    assert unchanged_since(PROBLEM, ORIGIN, ORIGIN, _last(origin=side(ORIGIN, 12.0)))


def test_a_new_kernel_or_another_measurement_is_measured() -> None:
    last = _last(origin=side(ORIGIN, 12.0), candidate=side(START, 5.0))
    assert not unchanged_since(PROBLEM, START, BEST, last)  # a new kernel
    # its best was timed in `last` and not taken there (slower than its start): this run's
    # search found it faster, so it is measured again, and may be taken now
    lost = _last(origin=side(ORIGIN, 12.0), start=side(START, 5.0), candidate=side(BEST, 5.5))
    assert not unchanged_since(PROBLEM, START, BEST, lost)
    assert not unchanged_since(PROBLEM, START, START, None)  # never measured
    assert not unchanged_since(PROBLEM, ORIGIN, None, _last(error="boom"))
    assert not unchanged_since(PROBLEM, BEST, BEST, last)  # its start was not timed in `last`
    broken = _last(origin=side(ORIGIN, 12.0), candidate=side(START, 0, status="incorrect"))
    assert not unchanged_since(PROBLEM, START, START, broken)  # no figure of its start there
