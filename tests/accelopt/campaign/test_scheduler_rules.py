"""Each rule of the expected-gain policies seen in what the scheduler picks and scores, so a
test fails when the rule is removed: the headroom factor (an item near the roofline has little
left), new insights of its operator (they raise an item's score, not only its reason text),
and an item whose repeat runs stop gaining sinking below one whose do not. In each case the
item the rule holds back comes first in the campaign file and has no more runs than the
other, so the ties' order (fewer runs, then file order) would pick it without the rule."""

from __future__ import annotations

import dataclasses
import math

import pytest
from campaign_log import ITEMS, T0, Log, finished, started

from accelopt import catalog as c
from accelopt.campaign_policy import Candidate, PolicyContext, policy

SILU, BMM = ITEMS[0].key, ITEMS[1].key  # silu first in the file


def _next(outs: list[c.Event]) -> c.CampaignRunScheduled:
    (pick,) = [e for e in outs if isinstance(e, c.CampaignRunScheduled)]
    return pick


def test_headroom_puts_the_item_far_from_the_roofline_first() -> None:
    """Both items doubled on their first run; silu's best is at 90 % of peak, bmm's at 10 %:
    both expect the same of their next run, and bmm, with 9 times the headroom, goes first."""
    log = Log()
    log.put(started({}, items=ITEMS[:2]))
    (silu,) = log.running()
    bmm = _next(log.put(finished(silu, T0 + 60, gain=2.0, pct_peak=0.9)))
    assert bmm.item == BMM
    pick = _next(log.put(finished(bmm, T0 + 120, gain=2.0, pct_peak=0.1)))
    assert pick.item == BMM and pick.reason.headroom == pytest.approx(0.9)
    queued = {q.item: q for q in pick.queue}
    assert queued[SILU].state == "ready" and queued[SILU].score is not None
    assert pick.reason.score / queued[SILU].score == pytest.approx(0.9 / 0.1, rel=1e-6)


def test_an_item_whose_repeat_run_did_not_pay_sinks_below_one_run_once() -> None:
    """silu and bmm both doubled on their first run; silu (first in the file) runs again and
    gains nothing: it now expects less than bmm, which has had one run, and scores lower."""
    log = Log()
    log.put(started({}, items=ITEMS[:2]))
    (silu,) = log.running()
    bmm = _next(log.put(finished(silu, T0 + 60, gain=2.0)))
    again = _next(log.put(finished(bmm, T0 + 120, gain=2.0)))
    assert again.item == SILU  # a tie: both run once, silu first in the file
    pick = _next(log.put(finished(again, T0 + 180, gain=1.0)))
    queued = {q.item: q for q in pick.queue}
    assert pick.item == BMM and queued[SILU].score is not None
    assert queued[SILU].score < pick.reason.score
    repeat = (0.2 + 0.0) / 2  # the device's repeat runs: the prior and silu's repeat (no gain)
    assert pick.reason.expected_gain == pytest.approx(repeat)


CTX = PolicyContext(prior_gain=0.2, device_run_s=60.0, fair_share_usd=None, repeat_run_gain=0.2)
FIRST = Candidate(
    key="first", device="cpu", order=0, runs=1, log_gains=(math.log(2.0),), pct_peak=0.5,
    cost_usd=0.0, seconds=60.0, new_insights=0,
)  # fmt: skip


@pytest.mark.parametrize(
    "name", ["expected_gain", "expected_gain_v2", "expected_gain_v2_same_language", "expected_gain_v3"]
)
@pytest.mark.parametrize("reopened", [False, True])
def test_new_insights_raise_an_item_s_score_not_only_its_reason(name: str, reopened: bool) -> None:
    """Two items alike but for two insights of its operator learnt since the second's last run
    (re-opening it after a plateau, or not): the second ranks first, by the insights' worth
    (the prior times n / (n + 2))."""
    second = dataclasses.replace(FIRST, key="second", order=1, new_insights=2, reopened=reopened)
    ranked = policy(name).rank([FIRST, second], CTX)
    assert [cand.key for cand, _ in ranked] == ["second", "first"]
    (_, top), (_, other) = ranked
    assert top.new_insights == 2 and (top.why.startswith("re-opened") == reopened)
    expected = top.expected_gain
    assert top.score / other.score == pytest.approx((expected + 0.2 * 2 / 4) / expected, rel=1e-6)


# A device where the one first run measured no gain (its best slower than its start) and one
# item's second run gained 4.6x: as a campaign logged it (cpu_v2/adamw, 8 runs, 11 items untried).
LUCKY = Candidate(
    key="lucky", device="cpu", order=0, runs=2, log_gains=(0.0, math.log(4.6)), pct_peak=0.3,
    cost_usd=0.0, seconds=130.0, new_insights=0,
)  # fmt: skip
UNTRIED = Candidate(
    key="untried", device="cpu", order=1, runs=0, log_gains=(), pct_peak=None,
    cost_usd=0.0, seconds=0.0, new_insights=0,
)  # fmt: skip
SKEWED = PolicyContext(
    prior_gain=0.2,
    device_run_s=65.0,
    fair_share_usd=None,
    first_run_gain=(0.2 + 0.0) / 2,
    repeat_run_gain=(0.2 + math.log(4.6)) / 2,
    device_run_median_s=65.0,
)


@pytest.mark.parametrize("name", ["expected_gain_v3", "expected_gain_v3_same_language"])
def test_v3_an_untried_item_expects_at_least_a_repeat_run_s_gain(name: str) -> None:
    """Under v3 the untried item expects the device's repeat-run gain (not the first runs'
    lower one) and goes first; v2 keeps re-running the lucky item."""
    ranked = policy(name).rank([LUCKY, UNTRIED], SKEWED)
    assert [c.key for c, _ in ranked] == ["untried", "lucky"]
    untried = dict((c.key, s) for c, s in ranked)["untried"]
    assert untried.expected_gain == pytest.approx(SKEWED.repeat_run_gain)
    assert "at least what repeat runs here gained" in untried.why
    assert [c.key for c, _ in policy("expected_gain_v2").rank([LUCKY, UNTRIED], SKEWED)] == [
        "lucky",
        "untried",
    ]


def test_v3_an_untried_item_keeps_the_first_runs_gain_where_it_is_higher() -> None:
    ctx = dataclasses.replace(SKEWED, first_run_gain=2.0)
    (top, score), _ = policy("expected_gain_v3").rank([LUCKY, UNTRIED], ctx)
    assert top.key == "untried" and score.expected_gain == pytest.approx(2.0)


# v4: gains told apart from noise; insights worth at most what the item's own runs paid. In
# each case the item the rule holds back comes first in the file, so the ties' order would
# pick it without the rule, and v3 (the rule's absence) does pick it.
V4 = ["expected_gain_v4", "expected_gain_v4_same_language"]
NOISE_CTX = PolicyContext(
    prior_gain=0.2,
    device_run_s=60.0,
    fair_share_usd=None,
    repeat_run_gain=0.15,
    repeat_run_net_gain=0.1,
)
# an item whose last two runs "gained" 1.28x each, inside a noise margin of 1.3x (its start and
# best each timed at +-30 % spread), next to one run once (its first run 20x, clear of noise)
NOISY = Candidate(
    key="noisy", device="cpu", order=0, runs=3, log_gains=(3.0, 0.25, 0.25), pct_peak=0.3,
    cost_usd=0.0, seconds=180.0, new_insights=0, net_log_gains=(2.74, 0.0, 0.0),
)  # fmt: skip
ONCE = Candidate(
    key="once", device="cpu", order=1, runs=1, log_gains=(3.0,), pct_peak=0.3,
    cost_usd=0.0, seconds=60.0, new_insights=0, net_log_gains=(2.74,),
)  # fmt: skip


@pytest.mark.parametrize("name", V4)
def test_v4_a_gain_inside_its_noise_counts_nothing(name: str) -> None:
    ranked = policy(name).rank([NOISY, ONCE], NOISE_CTX)
    assert [c.key for c, _ in ranked] == ["once", "noisy"]
    scores = {c.key: s for c, s in ranked}
    assert scores["noisy"].expected_gain == pytest.approx((0.0 + 0.0 + 0.1) / 3, abs=1e-6)  # rounded
    assert scores["once"].expected_gain == pytest.approx(0.1)  # the device's net repeat gain
    # v3 counts the noise as gains: (0.25 + 0.25 + 0.15) / 3 > 0.15, and re-runs the noisy item
    assert [c.key for c, _ in policy("expected_gain_v3").rank([NOISY, ONCE], NOISE_CTX)] == ["noisy", "once"]


@pytest.mark.parametrize("name", V4)
def test_v4_insights_that_did_not_pay_on_an_item_are_not_counted_again(name: str) -> None:
    """Eight new insights of its operator (another item's runs taught them) on an item whose
    last two runs gained nothing add nothing; on the item run once they add at most its own
    expectation (they double it)."""
    fed = dataclasses.replace(
        NOISY, key="fed", log_gains=(3.0, 0.0, 0.0), net_log_gains=(3.0, 0.0, 0.0), new_insights=8
    )
    ranked = policy(name).rank([fed, ONCE], NOISE_CTX)
    assert [c.key for c, _ in ranked] == ["once", "fed"]
    scores = {c.key: s for c, s in ranked}
    assert scores["once"].score / scores["fed"].score == pytest.approx(0.1 / (0.1 / 3), rel=1e-6)
    # v3 adds the prior's 8/10 to the fed item whatever its runs said, and picks it
    assert policy("expected_gain_v3").rank([fed, ONCE], NOISE_CTX)[0][0].key == "fed"
    told = dataclasses.replace(ONCE, new_insights=8)
    ((_, alone),) = policy(name).rank([told], NOISE_CTX)
    assert alone.score == pytest.approx(2 * scores["once"].score, rel=1e-6)
