"""The interleaved re-measure protocol (accelopt/remeasure.py) on its own: the order and seeds
of its profiles, when it stops, and the figures it gives (pure: profiles are built here)."""

from __future__ import annotations

import pytest

from accelopt.profile import LatencyStats, Profile
from accelopt.remeasure import (
    RUN_SEED_BASE,
    SEED_STRIDE,
    Remeasure,
    compare,
    drive,
    round_seeds,
    run_seed_base,
    side_result,
)


def timed(ms: float, spread: float = 0.0, t_peak: float | None = 0.5) -> Profile:
    lat = LatencyStats(samples_ms=[ms], median_ms=ms, min_ms=ms, max_ms=ms, spread=spread)
    return Profile(status="passed", device="cpu", latency=lat, t_peak_ms=t_peak)


FAILED = Profile(status="incorrect", device="cpu", log="\n  mismatch at [3]\nmore")
UNMEASURED = Profile(status="unmeasured", device="cpu")


def plan(protocol: Remeasure, answer=lambda slot: timed(1.0)) -> list[tuple[int, int, int]]:
    """(round, side, seed offset) of every profile the protocol asks for."""
    asked: list[tuple[int, int, int]] = []

    def profile(slot):
        asked.append((slot.round, slot.side, slot.seed_offset))
        return answer(slot)

    drive(protocol, profile)
    return asked


def test_rounds_interleave_reversing_the_order_on_one_seed_each():
    asked = plan(Remeasure(sides=3, rounds=3, seed_base=100))
    assert [(r, s) for r, s, _ in asked] == [
        (0, 0),
        (0, 1),
        (0, 2),
        (1, 2),
        (1, 1),
        (1, 0),
        (2, 0),
        (2, 1),
        (2, 2),
    ]
    # every side of a round on the round's seeds, fresh ones each round
    assert [seed for _, _, seed in asked] == [100] * 3 + [100 + SEED_STRIDE] * 3 + [100 + 2 * SEED_STRIDE] * 3
    assert round_seeds(100, 3) == [100, 100 + SEED_STRIDE, 100 + 2 * SEED_STRIDE]


def test_a_run_s_own_seeds_are_none_a_search_profile_used():
    bases = {run_seed_base("run", f"p{i}") for i in range(200)}
    assert all(RUN_SEED_BASE <= b < RUN_SEED_BASE + SEED_STRIDE for b in bases) and len(bases) > 150
    assert run_seed_base("run", "p0") == run_seed_base("run", "p0") != run_seed_base("other", "p0")


@pytest.mark.parametrize(("failing_side", "profiled"), [(0, 1), (1, 2)])
def test_a_side_without_a_time_ends_a_two_sided_comparison(failing_side, profiled):
    asked = plan(
        Remeasure(sides=2, rounds=3, seed_base=0),
        lambda slot: FAILED if slot.side == failing_side else timed(1.0),
    )
    assert len(asked) == profiled  # the failure is the result: no more rounds


def test_an_unmeasured_profile_has_no_time_either():
    asked = plan(
        Remeasure(sides=2, rounds=3, seed_base=0), lambda slot: UNMEASURED if slot.side else timed(1.0)
    )
    assert len(asked) == 2


def test_every_side_keeps_the_others_going_and_drops_only_the_failed_one():
    p = Remeasure(sides=3, rounds=2, seed_base=0, every_side=True)
    asked = plan(p, lambda slot: FAILED if slot.side == 0 else timed(1.0 + slot.side))
    assert [(r, s) for r, s, _ in asked] == [(0, 0), (0, 1), (0, 2), (1, 2), (1, 1)]
    base, one, two = p.results(["b", "k1", "k2"])
    assert (base.status, base.log_head) == ("incorrect", "mismatch at [3]")
    assert one.rounds_ms == [2.0, 2.0] and two.rounds_ms == [3.0, 3.0]
    # without every_side the lost baseline ends it at once
    assert (
        len(
            plan(
                Remeasure(sides=3, rounds=2, seed_base=0),
                lambda slot: FAILED if slot.side == 0 else timed(1.0),
            )
        )
        == 1
    )


def test_a_side_s_figure():
    side = side_result("k", [timed(2.0, 0.01), timed(4.0, 0.02), timed(3.0, 0.03)])
    assert side.status == "passed" and side.median_ms == 3.0 and side.rounds_ms == [2.0, 4.0, 3.0]
    assert side.spread == pytest.approx(
        (3.5 - 2.5) / 3.0
    )  # the rounds' IQR / median beats the profiles' 0.02
    assert side.peak_fraction == pytest.approx(0.5 / 3.0)
    steady = side_result("k", [timed(3.0, 0.2), timed(3.0, 0.1)])
    assert steady.spread == pytest.approx(0.15)  # the profiles' own median spread beats the rounds' 0
    broken = side_result("k", [timed(2.0), FAILED])
    assert broken.status == "incorrect" and broken.rounds_ms == [2.0] and broken.peak_fraction is None
    assert broken.log_head == "mismatch at [3]"


def test_a_speedup_agrees_with_the_recorded_one_only_within_both_noises():
    base, best = side_result("b", [timed(10.0, 0.02)] * 3), side_result("k", [timed(5.0, 0.02)] * 3)
    same = compare(base, best, (10.0, 5.0), (0.0, 0.0))
    assert same.speedup == same.recorded_speedup == 2.0 and same.agrees
    assert same.noise == pytest.approx(0.02)
    off = compare(base, best, (10.0, 4.0), (0.0, 0.0))  # recorded 2.5x against 2.0x: 25 % apart
    assert not off.agrees
    loose = compare(base, best, (10.0, 4.0), (0.3, 0.3))  # noisy recorded profiles: cannot be told apart
    assert loose.agrees and loose.noise > 0.25
    failed = compare(base, side_result("k", [FAILED]), (10.0, 5.0), (0.0, 0.0))
    assert failed.speedup is None and failed.agrees and failed.recorded_speedup == 2.0
