"""builtin/tuner: tunables, deterministic plans, and each role on a real C kernel."""

from __future__ import annotations

import asyncio

import pytest
from llm_helpers import SCALE_ADD_C, llm_config, sample_profile, scale_add_problem

from accelopt.catalog import RetrievedInsight
from accelopt.records import ChatMessage
from actors.llm.gateway import LLMGateway
from actors.llm.parsing import NO_CODE, ReplyParseError, extract_code, parse_insight
from actors.llm.role_table import render, tuner_reply
from actors.llm.tuner import insight_preferences, rank_changes
from hardware_agents.languages.tunables import Change, apply_change, find_tunables, moves, parse_change
from memory_index import format_for_prompt

PY_KERNEL = """import triton
import triton.language as tl

BLOCK_M = 64
NUM_WARPS: int = 4
NUM_STAGES = 3
eps = 5


@triton.jit
def _k(x_ptr, BLOCK: tl.constexpr):
    INNER = 3
    pass


def run(x):
    return x
"""


def _dicts(messages: list[ChatMessage]) -> list[dict]:
    return [{"role": m.role, "content": m.content} for m in messages]


def plan_for(source: str = SCALE_ADD_C, sample: int = 0, insights=(), request_id: str = "r") -> str:
    msgs = render(
        "planner",
        "c",
        problem=scale_add_problem(),
        source=source,
        profile=sample_profile(),
        insights=list(insights),
        device="cpu",
        seed=1,
        request_id=request_id,
    )
    return tuner_reply(_dicts(msgs), "planner", sample)


def test_c_tunables_skip_shapes_floats_and_zero():
    src = SCALE_ADD_C + "#define M 1024\n#define FLAG 0\n"
    found = {t.name: t.value for t in find_tunables(src, skip={"M", "N"})}
    assert found == {"TILE_J": 32, "UNROLL": 4}


def test_python_tunables_are_module_level_upper_case_ints():
    assert {t.name: t.value for t in find_tunables(PY_KERNEL)} == {
        "BLOCK_M": 64,
        "NUM_WARPS": 4,
        "NUM_STAGES": 3,
    }


def test_moves_keep_powers_of_two_and_bounds():
    [unroll] = [t for t in find_tunables("#define UNROLL 64\n")]
    assert moves(unroll, None) == [Change("UNROLL", 64, 32)]
    [tile] = find_tunables("#define TILE_J 256\n")
    assert moves(tile, max_shape=256) == [Change("TILE_J", 256, 128)]
    [one] = find_tunables("#define ROWS_PER_ITEM 1\n")
    assert moves(one, None) == [Change("ROWS_PER_ITEM", 1, 2)]
    [warps] = find_tunables("NUM_WARPS = 32\n")
    assert moves(warps, None) == [Change("NUM_WARPS", 32, 16)]


def test_plan_is_deterministic_names_the_constant_and_samples_differ():
    plan = plan_for()
    assert plan == plan_for()
    change = parse_change(plan)
    assert change is not None and change.name in ("TILE_J", "UNROLL")
    assert f"from {change.old} to {change.new}" in plan and plan.startswith(
        f"**{change.direction} {change.name}"
    )
    assert f"CHANGE: {change.name} {change.old} -> {change.new}" in plan
    # four moves exist (TILE_J x2 and /2, UNROLL x2 and /2): four samples take four different ones
    assert len({parse_change(plan_for(sample=i)) for i in range(4)}) == 4
    # the per-request profile order does not change a sample's move
    assert parse_change(plan_for(request_id="other")) == change


def test_insights_steer_the_direction():
    insight = RetrievedInsight(
        entry_id="e",
        problem="x",
        device="cpu",
        language="c",
        speedup=1.4,
        title="Increase TILE_J (32 -> 64)",
        text="**Increase TILE_J (32 -> 64)**\nfaster",
    )
    prefs = insight_preferences(format_for_prompt([insight]))
    assert prefs[("TILE_J", "Increase")] > 1 > prefs[("TILE_J", "Decrease")]
    slow = RetrievedInsight(
        entry_id="f",
        problem="x",
        device="cpu",
        language="c",
        speedup=0.7,
        title="Increase UNROLL (4 -> 8)",
        text="slower",
    )
    prefs = insight_preferences(format_for_prompt([slow]))
    assert prefs[("UNROLL", "Decrease")] > 1 > prefs[("UNROLL", "Increase")]
    # across many kernels, the first choice follows the insight far more often
    hits_with = hits_without = 0
    for i in range(60):
        src = SCALE_ADD_C.replace("scale_add", f"scale_add_{i}")
        with_pref = rank_changes(src, prefs=insight_preferences(format_for_prompt([insight])), key=str(i))[0]
        without = rank_changes(src, key=str(i))[0]
        hits_with += with_pref == Change("TILE_J", 32, 64)
        hits_without += without == Change("TILE_J", 32, 64)
    assert hits_with >= 36 and hits_with > hits_without + 12


def test_executor_applies_the_plan_and_returns_the_full_kernel():
    p = scale_add_problem()
    plan = "**Increase TILE_J from 32 to 64**\nDouble it.\nCHANGE: TILE_J 32 -> 64"
    reply = tuner_reply(
        _dicts(render("executor", "c", problem=p, source=SCALE_ADD_C, plan=plan, device="cpu")), "executor"
    )
    code = extract_code(reply, entry="kernel").code
    assert code == SCALE_ADD_C.replace("#define TILE_J 32", "#define TILE_J 64")
    assert "```c\n" in reply


def test_executor_reads_a_plan_written_by_another_model_and_keeps_kernel_without_change():
    p = scale_add_problem()
    prose = "I suggest raising UNROLL from 4 to 16 so the loop body has more independent work."
    reply = tuner_reply(
        _dicts(render("executor", "c", problem=p, source=SCALE_ADD_C, plan=prose, device="cpu"))
    )
    assert "#define UNROLL 16" in extract_code(reply).code
    vague = "Use better vectorization."
    reply = tuner_reply(
        _dicts(render("executor", "c", problem=p, source=SCALE_ADD_C, plan=vague, device="cpu"))
    )
    assert extract_code(reply).code == SCALE_ADD_C


def test_kernel_without_tunables():
    src = "void kernel(const float* x, const float* y, float* out) { out[0] = x[0] + y[0]; }\n"
    plan = plan_for(source=src)
    assert "No tunable constant" in plan and parse_change(plan) is None
    p = scale_add_problem()
    reply = tuner_reply(_dicts(render("executor", "c", problem=p, source=src, plan=plan, device="cpu")))
    assert extract_code(reply).code == src


def test_fixer_reverts_to_the_last_working_version():
    p = scale_add_problem()
    broken = SCALE_ADD_C.replace("#define TILE_J 32", "#define TILE_J 64").replace(
        "ALPHA *", "ALPHA * undefined *"
    )
    msgs = render(
        "fixer",
        "c",
        problem=p,
        source=broken,
        error_log="error: 'undefined' undeclared",
        status="compile_error",
        parent_source=SCALE_ADD_C,
        device="cpu",
    )
    assert extract_code(tuner_reply(_dicts(msgs))).code == SCALE_ADD_C
    msgs = render(
        "fixer", "c", problem=p, source=broken, error_log="error", status="compile_error", device="cpu"
    )
    with pytest.raises(ReplyParseError) as e:
        extract_code(tuner_reply(_dicts(msgs), "fixer"))
    assert e.value.reason == NO_CODE


def test_summarizer_names_constant_direction_and_speedup_and_the_planner_reads_it():
    p = scale_add_problem()
    fast = SCALE_ADD_C.replace("#define TILE_J 32", "#define TILE_J 64")
    msgs = render(
        "summarizer",
        "c",
        problem=p,
        slow_source=SCALE_ADD_C,
        fast_source=fast,
        speedup=1.37,
        positive=True,
        device="cpu",
    )
    reply = tuner_reply(_dicts(msgs))
    ins = parse_insight(reply)
    assert ins.title == "Increase TILE_J (32 -> 64)" and not ins.noop
    assert "1.370x faster" in ins.text and "`scale_add` (device cpu)" in ins.text
    assert (
        "Original code:\n```c\n#define TILE_J 32" in ins.text
        and "Optimized code:\n```c\n#define TILE_J 64" in ins.text
    )
    # the planner, shown this insight through the memory block, prefers the same direction
    entry = RetrievedInsight(
        entry_id="e",
        problem="scale_add",
        device="cpu",
        language="c",
        speedup=1.37,
        title=ins.title,
        text=ins.text,
    )
    assert insight_preferences(format_for_prompt([entry]))[("TILE_J", "Increase")] > 1
    same = render(
        "summarizer",
        "c",
        problem=p,
        slow_source=SCALE_ADD_C,
        fast_source=SCALE_ADD_C,
        speedup=1.05,
        device="cpu",
    )
    assert parse_insight(tuner_reply(_dicts(same))).noop


def test_python_kernel_round_trip():
    p = scale_add_problem()
    msgs = render(
        "planner", "triton", problem=p, source=PY_KERNEL, profile=None, device="h100", seed=0, request_id="r"
    )
    change = parse_change(tuner_reply(_dicts(msgs), "planner", 0))
    assert change is not None and change.name in ("BLOCK_M", "NUM_WARPS", "NUM_STAGES")
    plan = f"CHANGE: {change.name} {change.old} -> {change.new}"
    reply = tuner_reply(
        _dicts(render("executor", "triton", problem=p, source=PY_KERNEL, plan=plan, device="h100"))
    )
    block = extract_code(reply)
    assert block.lang == "python" and block.code == apply_change(PY_KERNEL, change)


def test_through_litellm_each_role_and_deterministic():
    gw = LLMGateway(llm_config("builtin/tuner"))
    p = scale_add_problem()
    planner_msgs = render(
        "planner", "c", problem=p, source=SCALE_ADD_C, profile=None, device="cpu", seed=0, request_id="r"
    )

    async def go():
        a = await gw.complete("planner", planner_msgs, run_id="r", request_id="a", sample_index=1)
        b = await gw.complete("planner", planner_msgs, run_id="r", request_id="b", sample_index=1)
        return a[-1], b[-1]

    a, b = asyncio.run(go())
    assert a.error is None and a.response == b.response and a.model == "builtin/tuner"
    assert a.response == tuner_reply(_dicts(planner_msgs), "planner", 1)
