"""Every role's prompt for one problem per kernel language, as a real model would get it:
cpu/silu (C), triton/rmsnorm_h4096 (Triton) and silu of an NKIBench-format folder (NKI,
written by tests/hardware_agents/neuron/nkibench_fixture.py and imported with `import_nkibench`). Used by
the golden tests (tests/prompts/test_prompt_goldens.py) and benchmarks/prompt_tokens_bench.py.
"""

from __future__ import annotations

import sys
from pathlib import Path

from testdirs import NEURON

import suites
from accelopt.catalog import RetrievedInsight
from accelopt.problem import Problem
from accelopt.profile import LatencyStats, Profile
from accelopt.records import ChatMessage
from actors.llm.role_table import render
from prompts import ROLES

# (language key, suite, problem, device)
SAMPLES = (
    ("cpu", "cpu", "silu", "cpu"),
    ("triton", "triton", "rmsnorm_h4096", "h100"),
    ("nkibench", "nkibench", "silu", "trn1"),
)


def nkibench_problem(workdir: Path, name: str = "silu") -> Problem:
    sys.path.insert(0, str(NEURON))
    from nkibench_fixture import CATALOG, write_nkibench

    from suites.nkibench import import_nkibench

    write_nkibench(workdir / "src", [CATALOG[name]])
    report = import_nkibench(workdir / "src", workdir / "suite", name="nkibench")
    return {p.name: p for p in suites.load_suite(report.out)}[name]


def problem_for(key: str, workdir: Path) -> Problem:
    _, suite, name, _ = next(s for s in SAMPLES if s[0] == key)
    if suite == "nkibench":
        return nkibench_problem(workdir, name)
    return {p.name: p for p in suites.load_suite(suite)}[name]


def sample_profile(device: str) -> Profile:
    return Profile(
        status="passed",
        device=device,
        latency=LatencyStats(samples_ms=[2.0, 2.1, 2.2], median_ms=2.1, min_ms=2.0, max_ms=2.2, spread=0.05),
        t_peak_ms=0.42,
        peak_fraction=0.2,
        bound="memory",
        counters={"bytes_moved": 3.1e6, "achieved_gbs": 14.8},
    )


def sample_insight(device: str, language: str) -> RetrievedInsight:
    return RetrievedInsight(
        entry_id="golden-insight",
        title="Fuse the two passes over x",
        device=device,
        language=language,
        problem="silu",
        speedup=1.42,
        score=0.83,
        text="**Fuse the two passes over x**\nThe slow kernel read x twice; the fast one computes the "
        "result in the pass that loads it, so every input byte crosses memory once.",
        diff="--- slow\n+++ fast\n@@ -3,3 +3,2 @@\n-    t = load(x)\n-    y = f(load(x))\n+    y = f(load(x))\n"
        "     store(out, y)",
    )


def render_all(key: str, problem: Problem) -> dict[str, list[ChatMessage]]:
    """role -> messages for the sample problem of `key`."""
    _, _, _, device = next(s for s in SAMPLES if s[0] == key)
    lang = problem.baseline.spec.language
    source = problem.baseline.entry_file().content
    faster = source + ("\n/* variant */\n" if lang == "c" else "\n# variant\n")
    ctx = {
        "planner": dict(
            problem=problem,
            source=source,
            profile=sample_profile(device),
            insights=[sample_insight(device, lang)],
            device=device,
            seed=0,
            request_id="golden",
        ),
        "executor": dict(
            problem=problem,
            source=source,
            device=device,
            plan="**Fuse the two passes**\nCompute the output in the loop that loads the input.",
        ),
        "fixer": dict(
            problem=problem,
            source=faster,
            device=device,
            status="compile_error",
            error_log="error: 'tile' undeclared (first use in this function)",
            parent_source=source,
        ),
        "summarizer": dict(
            problem=problem,
            slow_source=source,
            fast_source=faster,
            speedup=1.42,
            positive=True,
            device=device,
        ),
    }
    return {role: render(role, lang, **ctx[role]) for role in ROLES}


def as_text(messages: list[ChatMessage]) -> str:
    return "".join(f"=== {m.role} ===\n{m.content.rstrip()}\n" for m in messages)
