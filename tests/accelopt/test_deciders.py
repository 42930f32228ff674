"""The coordinator's small deciders on their own (pure: events built here): lanes and
backpressure, spend and budget, model health."""

from __future__ import annotations

from accelopt import catalog as ev
from accelopt.lanes import Lanes, lane_of
from accelopt.model_health import ModelHealth
from accelopt.records import TokenUsage
from accelopt.spend import Spend

RUN = "r"


def env(kind: type[ev.Event], *key: object, cause: ev.Event | None = None) -> ev.Envelope:
    return ev.envelope(kind, RUN, *key, ts=0.0, cause=cause)


def plan_request(i: int) -> ev.PlanRequested:
    return ev.PlanRequested(
        **env(ev.PlanRequested, i),
        problem="p",
        iteration=1,
        candidate_id="k",
        sample_index=i,
        language="c",
        device="cpu",
        candidate_source="",
    )


def profile_request(i: int, device: str = "cpu") -> ev.ProfileRequested:
    return ev.ProfileRequested(
        **env(ev.ProfileRequested, i, device),
        kernel_id=f"k{i}",
        problem="p",
        device=device,
        language="c",
        source="",
    )


def call(
    request_id: str, cost: float = 0.0, *, error: str | None = None, permanent: bool = False, n: int = 0
):
    return ev.LLMCallCompleted(
        **env(ev.LLMCallCompleted, request_id, n),
        role="planner",
        request_id=request_id,
        model="m",
        params={},
        messages=[],
        response="",
        usage=TokenUsage(),
        cost_usd=cost,
        latency_s=0.0,
        content_hash="h",
        error=error,
        permanent=permanent,
    )


# --- lanes ------------------------------------------------------------------------------------


def test_each_role_and_device_is_a_lane_of_its_own():
    assert lane_of(plan_request(0)) == "llm:planner"
    assert lane_of(profile_request(0)) == "profile:cpu" != lane_of(profile_request(0, "h100"))
    assert lane_of(ev.RunCompleted(**env(ev.RunCompleted), reason="completed")) is None


def test_a_lane_holds_its_limit_in_flight_and_releases_in_order():
    lanes = Lanes(llm_limit=2, profile_limit=1)
    plans = [plan_request(i) for i in range(4)]
    assert [lanes.admit(r) for r in plans] == [True, True, False, False]
    # another lane is not held back by this one's queue
    assert lanes.admit(profile_request(0)) and not lanes.admit(profile_request(1))
    released, dropped = lanes.release(plans[0], stopping=False)
    assert released == [plans[2]] and not dropped  # first in, first out
    released, _ = lanes.release(plans[1], stopping=False)
    assert released == [plans[3]] and lanes.inflight["llm:planner"] == 2


def test_a_stopping_run_drops_queued_llm_requests_but_not_profiles():
    lanes = Lanes(llm_limit=1, profile_limit=1)
    plans, profiles = [plan_request(i) for i in range(3)], [profile_request(i) for i in range(2)]
    for r in plans + profiles:
        lanes.admit(r)
    released, dropped = lanes.release(plans[0], stopping=True)
    assert released == [] and dropped == [plans[1], plans[2]]
    released, dropped = lanes.release(profiles[0], stopping=True)
    assert released == [profiles[1]] and dropped == []
    lanes = Lanes(llm_limit=1, profile_limit=1)
    for r in plans + profiles:
        lanes.admit(r)
    assert lanes.drop_llm() == plans[1:] and list(lanes.queued["profile:cpu"]) == [profiles[1]]


# --- spend and budget -----------------------------------------------------------------------------


def test_a_call_counts_once():
    spend = Spend(budget_usd=None)
    c = call("a", 0.25)
    assert spend.count(c) and not spend.count(c) and spend.spent_usd == 0.25
    assert spend.count(call("a", 0.5, n=1)) and spend.spent_usd == 0.75


def test_the_call_that_reaches_the_budget_stops_the_run_once():
    spend = Spend(budget_usd=1.0)
    first, second, third = call("a", 0.6), call("a", 0.4, n=1), call("a", 0.4, n=2)
    assert spend.count(first) and spend.step(first, env) == []
    spend.count(second)
    (stop,) = spend.step(second, env)
    assert isinstance(stop, ev.BudgetExceeded) and stop.spent_usd == 1.0 and stop.budget_usd == 1.0
    assert stop.causation_id == second.event_id and spend.exceeded
    spend.count(third)
    assert spend.step(third, env) == []  # stopped once
    assert Spend(budget_usd=None).step(third, env) == []


# --- model health ---------------------------------------------------------------------------------


def test_a_streak_of_permanent_failures_fails_the_run():
    health = ModelHealth(fail_after=3)
    auth = [call(f"r{i}", error="AuthenticationError: 401", permanent=True) for i in range(3)]
    assert health.step(auth[0], env, ended=False) == [] and health.step(auth[1], env, ended=False) == []
    (failed,) = health.step(auth[2], env, ended=False)
    assert isinstance(failed, ev.RunFailed) and failed.reason == "LLM calls failing (planner)"
    assert "the last 3 calls of the planner (m)" in failed.detail and "401" in failed.detail


def test_any_other_outcome_resets_the_streak():
    health = ModelHealth(fail_after=2)
    auth = call("a", error="AuthenticationError", permanent=True)
    assert health.step(auth, env, ended=False) == []
    assert health.step(call("b", error="RateLimitError", permanent=False), env, ended=False) == []
    assert health.step(auth, env, ended=False) == []  # one again, not two
    assert health.step(call("c"), env, ended=False) == [] and health.step(auth, env, ended=False) == []


def test_no_failure_when_off_or_once_the_run_ended():
    auth = call("a", error="AuthenticationError", permanent=True)
    off = ModelHealth(fail_after=0)
    assert all(off.step(auth, env, ended=False) == [] for _ in range(5))
    ended = ModelHealth(fail_after=1)
    assert ended.step(auth, env, ended=True) == []
