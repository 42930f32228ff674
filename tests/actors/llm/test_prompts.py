"""Prompt rendering: the paper's bugs fixed (speedup substituted, shapes shown, true
correctness bar, full shuffled profile, insights with device/language/speedup)."""

from __future__ import annotations

import re

import pytest
from llm_helpers import SCALE_ADD_C, sample_profile, scale_add_problem

import prompts
from accelopt.catalog import RetrievedInsight
from actors.llm.role_table import render
from prompts import LANGUAGES, ROLES, PromptError

INSIGHTS = [
    RetrievedInsight(
        entry_id="a",
        problem="matmul",
        device="trn1",
        language="nki",
        speedup=1.42,
        title="Increase TILE_J (32 -> 64)",
        text="**Increase TILE_J (32 -> 64)**\nBigger tiles.",
    ),
    RetrievedInsight(
        entry_id="b",
        problem="silu",
        device="cpu",
        language="c",
        speedup=0.8,
        title="Halve CHUNK",
        text="Smaller chunks hurt.",
    ),
]


def _planner(**kw):
    args = dict(
        problem=scale_add_problem(),
        source=SCALE_ADD_C,
        profile=sample_profile(),
        insights=INSIGHTS,
        device="cpu",
        seed=7,
        request_id="req-1",
    )
    args.update(kw)
    return render("planner", "c", **args)


def test_planner_shows_shapes_tolerance_interface_and_kernel():
    system, user = _planner()
    assert system.role == "system" and user.role == "user"
    assert "1 optimization plan" in user.content and "1 step" in user.content
    assert "- M = 1024" in user.content and "- N = 256" in user.content  # concrete workload axes
    assert "x: float32[M, N] = [1024, 256]" in user.content
    assert "3e-05" in user.content and "0.0001 * max(1, rms(ref))" in user.content  # the real bar
    assert "const float* y /* [M][N] */" in user.content and "float* out /* [M][N] */" in user.content
    assert (
        "/* axis macros: N=256 M=1024 */" in user.content and "Outputs contain NaN on entry" in user.content
    )
    assert "#define TILE_J 32" in user.content
    assert "```python\ndef run(x, y):" in user.content  # numpy reference for C


def test_planner_profile_complete_and_shuffled_per_request():
    user = _planner()[1].content
    profile = user.split("# Profile\n", 1)[1]
    for key in (
        "latency_ms (median of 3 runs): 2.1",
        "percent_of_peak: 20.0%",
        "bound (roof that limits",
        "roofline_time_ms",
        "bytes_moved: 3.1e+06",
        "threads: 2",
        "status: passed",
    ):
        assert key in profile
    orders = {
        tuple(_planner(request_id=f"r{i}")[1].content.split("# Profile\n", 1)[1].splitlines())
        for i in range(8)
    }
    assert len(orders) > 1  # shuffled by request
    assert _planner()[1].content == _planner()[1].content  # deterministic for (seed, request)


def test_planner_insights_with_device_language_and_speedup():
    system = _planner()[0].content
    assert "# Experiences" in system
    assert "**Increase TILE_J (32 -> 64)**" in system
    assert "`matmul`, device trn1, language nki: 1.42x faster" in system
    assert "`silu`, device cpu, language c: 0.80x" in system
    assert "# Experiences" not in _planner(insights=[])[0].content


def test_planner_without_profile():
    assert "No profile is available" in _planner(profile=None)[1].content


def test_summarizer_speedup_is_substituted():
    system, user = render(
        "summarizer",
        "c",
        problem=scale_add_problem(),
        slow_source="int a;",
        fast_source="int b;",
        speedup=1.372,
        positive=True,
        device="cpu",
    )
    assert "{speedup}" not in user.content and "{{" not in user.content
    assert "# Speedup\n1.372x" in user.content
    assert "No optimization found" in system.content and "**{Short description" in system.content
    _, rev = render(
        "summarizer",
        "c",
        problem=scale_add_problem(),
        slow_source="a",
        fast_source="b",
        speedup=1.25,
        positive=False,
        device="cpu",
    )
    assert "1.250x" in rev.content and "regression seen in reverse" in rev.content


def test_executor_and_fixer():
    p = scale_add_problem()
    _, user = render(
        "executor", "c", problem=p, source=SCALE_ADD_C, plan="Tile by 64 ```not a fence```", device="cpu"
    )
    assert "# Optimization plan\n````text\nTile by 64" in user.content  # fence longer than the plan's
    assert "one ```c code block" in user.content
    _, fix = render(
        "fixer",
        "c",
        problem=p,
        source="bad",
        error_log="error: undefined_symbol",
        status="compile_error",
        parent_source=SCALE_ADD_C,
        device="cpu",
    )
    assert "`compile_error`" in fix.content and "undefined_symbol" in fix.content
    assert "# Last working version" in fix.content
    _, fix2 = render("fixer", "c", problem=p, source="bad", error_log="", status="incorrect", device="cpu")
    assert "# Last working version" not in fix2.content and "(the harness gave no log)" in fix2.content


@pytest.mark.parametrize("language", LANGUAGES)
@pytest.mark.parametrize("role", ROLES)
def test_every_template_renders_without_leftover_placeholders(role, language):
    p = scale_add_problem()
    ctx = dict(
        problem=p,
        source="code",
        profile=sample_profile(),
        insights=INSIGHTS,
        device="dev",
        seed=1,
        request_id="r",
        plan="plan",
        error_log="log",
        status="incorrect",
        parent_source="old",
        slow_source="a",
        fast_source="b",
        speedup=1.5,
    )
    messages = render(role, language, **ctx)
    assert [m.role for m in messages] == ["system", "user"]
    for m in messages:
        assert not re.search(r"\{\{[a-z_]+\}\}", m.content)
    if role != "summarizer":
        assert "- M = 1024" in messages[1].content


def test_errors_are_clear():
    with pytest.raises(PromptError, match="kernel language 'cuda'"):
        render("planner", "cuda", problem=scale_add_problem(), source="x", seed=0, request_id="r")
    with pytest.raises(PromptError, match="missing context plan"):
        render("executor", "c", problem=scale_add_problem(), source="x")
    with pytest.raises(PromptError, match="unknown role"):
        render("critic", "c")


def test_templates_ship_as_package_data():
    """Every role has a template for every built-in language (its own, or the role's
    `<role>.txt` for every language), and every language its primer."""
    for role in ROLES:
        for lang in LANGUAGES:
            assert prompts.role_template(role, lang)[0].strip()
    for lang in LANGUAGES:
        assert prompts.template_text(f"primer.{lang}.txt").strip()
