"""`accelopt run` with a real model behind a real HTTP API as planner, executor, fixer and
summarizer: SmolLM2-135M on loopback, a CPU problem, through the command line a user
types. A 135M model writes prose without code, unclosed fences, Python or C++ in a C
file and wrong signatures; the run must turn all of it into failure events and fix
requests and still complete. Only structure is asserted, never the model's text."""

from __future__ import annotations

import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from accelopt import catalog as c
from actors.llm.local_llm import LITELLM_MODEL
from events.logfile import read_events

PROBLEMS = "swiglu"  # one problem: every call of a 135M model costs seconds (below)
# one plan and one kernel per problem and iteration: each call of a 135M model that seldom
# stops costs up to max_tokens / ~80 tokens/s on this machine, so the call count and the
# allowance set the time (384 tokens: a plan or a short C kernel; a cut reply is a failure event)
SMALL_SEARCH = [
    "--preset",
    "quick",
    "--set",
    "search.iterations=1",
    "--set",
    "search.fix_rounds=1",
    "--set",
    "search.beam_width=1",
    "--set",
    "search.plans_per_candidate=1",
    "--set",
    "llm.default.max_tokens=384",
]


def _accelopt(*args: str, timeout: float = 1800) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "cli.main", *args], capture_output=True, text=True, timeout=timeout
    )


def test_a_model_with_no_price_is_refused_with_what_to_do(llm_server, tmp_path):
    out = _accelopt(
        "run",
        "--problems",
        PROBLEMS,
        "--model",
        LITELLM_MODEL,
        "--api-base",
        llm_server.url,
        "--root",
        str(tmp_path),
        *SMALL_SEARCH,
        timeout=300,
    )
    assert out.returncode == 2, out.stdout + out.stderr
    text = " ".join((out.stdout + out.stderr).split())
    assert f"no price known for model(s) {LITELLM_MODEL}" in text
    assert "--price IN OUT" in text and "--allow-unpriced" in text
    assert not list(tmp_path.glob("*/log.aolog"))  # nothing ran


@pytest.fixture(scope="module")
def real_run(llm_server, tmp_path_factory):
    root = tmp_path_factory.mktemp("real-run")
    out = _accelopt(
        "run",
        "--problems",
        PROBLEMS,
        "--model",
        LITELLM_MODEL,
        "--api-base",
        llm_server.url,
        "--price",
        "0",
        "0",
        "--root",
        str(root / "runs"),
        "--memory",
        str(root / "memory"),
        *SMALL_SEARCH,
    )
    runs = list((root / "runs").glob("*/log.aolog"))
    return out, runs[0].parent if runs else None


def test_the_run_completes_with_a_results_table(real_run):
    out, run_dir = real_run
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    assert run_dir is not None and (run_dir / "results.json").is_file()
    assert ": completed" in out.stdout
    for name in PROBLEMS.split(","):
        assert name in out.stdout
    # the preflight made its one tiny call to the model before the run, and the budget was stated
    text = " ".join(out.stdout.split())
    assert f"preflight: {LITELLM_MODEL} (planner, executor, fixer, summarizer) answered in" in text
    assert "LLM budget: $50.00" in text


def test_every_call_is_recorded_with_the_servers_token_counts(real_run):
    _, run_dir = real_run
    events = read_events(run_dir / "log.aolog")
    started = events[0]
    assert isinstance(started, c.RunStarted)
    assert started.prices[LITELLM_MODEL].source == "config"
    calls = [e for e in events if isinstance(e, c.LLMCallCompleted)]
    # none at all: the search never asked (say why: the baseline's profile, the run's end)
    assert calls, [(e.type, getattr(getattr(e, "profile", None), "log", "")[:300]) for e in events[-8:]]
    assert all(e.model == LITELLM_MODEL for e in calls)
    answered = [e for e in calls if e.error is None]
    assert answered, [e.error for e in calls]
    for e in answered:
        assert e.usage.prompt_tokens > 100 and e.usage.completion_tokens > 0 and not e.usage.estimated
        assert e.latency_s > 0 and e.cost_usd == 0.0
    # every LLM request has its call record
    requests = {
        e.event_id
        for e in events
        if e.type in ("PlanRequested", "ImplementationRequested", "FixRequested", "SummaryRequested")
    }
    assert requests <= {e.request_id for e in calls}


def test_every_reply_ends_in_a_kernel_or_a_failure_event_and_every_kernel_is_profiled_once(real_run):
    _, run_dir = real_run
    events = read_events(run_dir / "log.aolog")
    kernel_requests = {
        e.event_id for e in events if isinstance(e, c.ImplementationRequested | c.FixRequested)
    }
    outcomes = Counter(
        e.request_id
        for e in events
        if isinstance(e, c.KernelProposed | c.ProposalFailed) and e.request_id in kernel_requests
    )
    assert set(outcomes) == kernel_requests and set(outcomes.values()) == {1}
    plans = {e.event_id for e in events if isinstance(e, c.PlanRequested)}
    planned = Counter(
        e.request_id
        for e in events
        if isinstance(e, c.PlanProposed | c.ProposalFailed) and e.request_id in plans
    )
    assert set(planned) == plans and set(planned.values()) == {1}
    # a kernel is its content: one proposed again is the same kernel, profiled once
    proposed = {e.kernel_id for e in events if isinstance(e, c.KernelProposed)}
    # the end-of-problem re-measure profiles baseline and best again (purpose remeasure): not counted
    remeasure = {e.event_id for e in events if isinstance(e, c.ProfileRequested) and e.purpose == "remeasure"}
    profiled = Counter(
        e.kernel_id for e in events if isinstance(e, c.KernelProfiled) and e.request_id not in remeasure
    )
    assert set(profiled) == proposed and set(profiled.values()) == {1}
    # failed profiles went to the fixer within its budget of one round
    failed = {
        e.kernel_id
        for e in events
        if isinstance(e, c.KernelProfiled)
        and e.profile.status in ("compile_error", "runtime_error", "incorrect", "timeout")
    }
    fixes = {e.kernel_id: e for e in events if isinstance(e, c.FixRequested)}
    first_round = {
        k.kernel_id
        for k in events
        if isinstance(k, c.KernelProposed) and k.fix_round == 0 and k.iteration > 0
    }
    assert failed & first_round <= set(fixes)
    assert all(f.fix_round == 1 for f in fixes.values())


def test_the_best_kernels_are_written_out(real_run):
    _, run_dir = real_run
    best = sorted(p.stem for p in (run_dir / "best").glob("*.c"))
    assert best == sorted(PROBLEMS.split(","))
    assert all(Path(run_dir / "best" / f"{p}.c").read_text().strip() for p in best)
