"""A model that fails mid-run with errors no retry can fix (authentication, unknown model)
stops the run as `failed` with the error, instead of completing on the baselines."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from openai_stub import OpenAIStub
from testdirs import LOOP

sys.path.insert(0, str(LOOP))

import msgspec
from sim import RUN, World, drive

from accelopt import catalog as c
from accelopt.records import TokenUsage
from replay.verify import verify


class FailingPlanner(World):
    """The planner's calls fail as `outcomes` says, in order ("auth", "transient", "ok")."""

    def __init__(self, outcomes: list[str]) -> None:
        super().__init__()
        self.outcomes = list(outcomes)

    def answer(self, e):
        if not isinstance(e, c.PlanRequested) or not self.outcomes:
            return super().answer(e)
        kind = self.outcomes.pop(0)
        if kind == "ok":
            return super().answer(e)
        error = "AuthenticationError: 401 bad key" if kind == "auth" else "RateLimitError: 429"
        call = c.LLMCallCompleted(
            **self.env("LLMCallCompleted", e.event_id),
            role="planner",
            request_id=e.event_id,
            model="m",
            params={},
            messages=[],
            response=None,
            usage=TokenUsage(),
            cost_usd=0.0,
            latency_s=0.0,
            content_hash="h",
            error=error,
            permanent=kind == "auth",
        )
        return [
            call,
            c.ProposalFailed(
                **self.env("ProposalFailed", e.event_id),
                stage="plan",
                request_id=e.event_id,
                problem=e.problem,
                iteration=e.iteration,
                reason="llm error",
                detail=error,
            ),
        ]


def _failed(log):
    return [e for e in log if isinstance(e, c.RunFailed)]


def test_three_permanent_failures_in_a_row_fail_the_run():
    core, log, _ = drive(["search.iterations=3"], world=FailingPlanner(["auth"] * 20), problems=("a",))
    [failed] = _failed(log)
    assert failed.run_id == RUN and "planner" in failed.reason and "AuthenticationError" in failed.detail
    calls = [e for e in log if isinstance(e, c.LLMCallCompleted)]
    assert calls.index(next(e for e in calls if e.event_id == failed.causation_id)) == 2  # the third call
    assert core.failed and not any(isinstance(e, c.RunCompleted) for e in log)
    after = log[log.index(failed) + 1 :]
    assert not [e for e in after if e.type.endswith("Requested")]  # nothing decided after it


def test_a_run_its_model_failed_replays_with_verify():
    """The core's RunFailed is checked as a decision (a run's RunFailed is the session's type)."""
    _, log, _ = drive(["search.iterations=3"], world=FailingPlanner(["auth"] * 20), problems=("a",))
    report = verify(log)
    assert report.ok, report.divergence.describe()
    forged = [msgspec.structs.replace(e, detail="forged") if isinstance(e, c.RunFailed) else e for e in log]
    report = verify(forged)
    assert (
        not report.ok
        and report.divergence.event_type == "RunFailed"
        and "detail" in report.divergence.describe()
    )


def test_a_success_or_a_transient_error_resets_the_count():
    outcomes = ["auth", "auth", "ok", "auth", "auth", "transient", "auth", "auth"] + ["ok"] * 40
    _, log, _ = drive(["search.iterations=3"], world=FailingPlanner(outcomes), problems=("a",))
    assert not _failed(log) and any(isinstance(e, c.RunCompleted) for e in log)


def test_fail_after_zero_never_stops_and_the_limit_is_configurable():
    _, log, _ = drive(
        ["search.iterations=2", "llm.fail_after=0"], world=FailingPlanner(["auth"] * 20), problems=("a",)
    )
    assert not _failed(log) and any(isinstance(e, c.RunCompleted) for e in log)
    _, log, _ = drive(
        ["search.iterations=2", "llm.fail_after=1"], world=FailingPlanner(["auth"] * 20), problems=("a",)
    )
    assert len(_failed(log)) == 1


def test_a_run_whose_key_is_rejected_mid_run_ends_failed(tmp_path):
    """Through the command line, with Ray, NATS and the real gateway; the provider is a
    loopback server answering 401 (the preflight's probe is off, as if the key had been
    revoked after the start)."""
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    env["STUB_KEY"] = "sk-wrong"
    with OpenAIStub(status=401) as stub:
        out = subprocess.run(
            [
                sys.executable,
                "-m",
                "cli.main",
                "run",
                "--problems",
                "silu",
                "--model",
                "openai/gpt-4o-mini",
                "--api-base",
                stub.url,
                "--set",
                "llm.default.api_key_env=STUB_KEY",
                "--no-preflight",
                "--preset",
                "quick",
                "--set",
                "search.iterations=2",
                "--root",
                str(tmp_path / "runs"),
                "--memory",
                str(tmp_path / "memory"),
            ],
            capture_output=True,
            text=True,
            timeout=900,
            env=env,
        )
    text = " ".join(out.stdout.split())
    assert out.returncode == 1, out.stdout[-3000:] + out.stderr[-3000:]
    assert ": failed" in text and "completed" not in text
    said = " ".join(out.stderr.split())  # why it failed: an error line, on stderr
    assert "LLM calls failing (planner)" in text + said and "AuthenticationError" in text + said, said
    # at least the 3 that stop the run (a call in flight then still counts), each sent once: no retries
    calls = len(stub.requests)
    assert calls >= 3 and f"failed LLM calls: planner {calls} of {calls}" in text
    [results] = (tmp_path / "runs").glob("*/results.json")
    assert json.loads(results.read_text())["status"] == "failed"
    listing = subprocess.run(
        [sys.executable, "-m", "cli.main", "runs", "--root", str(tmp_path / "runs"), "--json"],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )
    [row] = [json.loads(line) for line in listing.stdout.splitlines()]
    assert row["status"] == "failed" and row["failed_llm_calls"] == {"planner": calls}
