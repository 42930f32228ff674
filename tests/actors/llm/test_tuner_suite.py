"""builtin/tuner on every baseline of the CPU suites: a plan, the applied kernel (which must
still compile with the system C compiler) and the insight for the pair; on cpu_v2, every
move of the first samples stays inside the `// tune:` legal values."""

from __future__ import annotations

import shutil
import subprocess

import pytest

import suites
from actors.llm.parsing import extract_code, parse_insight
from actors.llm.role_table import render, tuner_reply
from hardware_agents.languages.tunables import find_tunables, parse_change, parse_changes
from suites.tuning import parse_space

CC = shutil.which("gcc") or shutil.which("cc")
PROBLEMS = suites.load_suite("cpu")
V2 = suites.load_suite("cpu_v2")


def _dicts(messages):
    return [{"role": m.role, "content": m.content} for m in messages]


@pytest.mark.parametrize("problem", PROBLEMS, ids=[p.name for p in PROBLEMS])
def test_plan_apply_summarize(problem):
    src = problem.baseline.entry_file().content
    axes = problem.axis_values()
    assert find_tunables(src, skip=axes), f"{problem.name}: baseline has no tunable constant"
    plan = tuner_reply(
        _dicts(
            render(
                "planner",
                "c",
                problem=problem,
                source=src,
                profile=None,
                device="cpu",
                seed=0,
                request_id="r",
            )
        ),
        "planner",
        0,
    )
    change = parse_change(plan)
    assert change is not None and change.name not in axes
    reply = tuner_reply(
        _dicts(render("executor", "c", problem=problem, source=src, plan=plan, device="cpu")), "executor"
    )
    new = extract_code(reply, entry=problem.baseline.entry_symbol).code
    assert new != src and f" {change.new}" in new
    if CC:
        macros = [f"-D{k}={v}" for k, v in axes.items()]
        proc = subprocess.run(
            [CC, "-std=gnu11", "-fsyntax-only", "-fopenmp", *macros, "-x", "c", "-"],
            input=new,
            capture_output=True,
            text=True,
            check=False,
        )
        assert proc.returncode == 0, proc.stderr
    insight = parse_insight(
        tuner_reply(
            _dicts(
                render(
                    "summarizer",
                    "c",
                    problem=problem,
                    slow_source=src,
                    fast_source=new,
                    speedup=1.2,
                    device="cpu",
                )
            )
        )
    )
    assert insight.title == f"{change.direction} {change.name} ({change.old} -> {change.new})"


@pytest.mark.parametrize("problem", V2, ids=[p.name for p in V2])
def test_v2_moves_stay_legal_and_compile(problem):
    src = problem.baseline.entry_file().content
    legal = {k.name: set(k.values) for k in parse_space(src)}
    axes = problem.axis_values()
    assert {t.name for t in find_tunables(src, skip=axes)} >= set(legal)
    for sample in range(6):
        plan = tuner_reply(
            _dicts(
                render(
                    "planner",
                    "c",
                    problem=problem,
                    source=src,
                    profile=None,
                    device="cpu",
                    seed=0,
                    request_id="r",
                )
            ),
            "planner",
            sample,
        )
        changes = parse_changes(plan)
        assert changes, plan
        for ch in changes:
            assert ch.name in legal and ch.new in legal[ch.name], (ch, legal.get(ch.name))
        reply = tuner_reply(
            _dicts(render("executor", "c", problem=problem, source=src, plan=plan, device="cpu")), "executor"
        )
        new = extract_code(reply, entry=problem.baseline.entry_symbol).code
        if CC and sample < 2:
            macros = [f"-D{k}={v}" for k, v in axes.items()]
            proc = subprocess.run(
                [CC, "-std=gnu11", "-fsyntax-only", "-fopenmp", *macros, "-x", "c", "-"],
                input=new,
                capture_output=True,
                text=True,
                check=False,
            )
            assert proc.returncode == 0, proc.stderr
