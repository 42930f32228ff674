"""builtin/tuner: legal-value comments, multi-constant moves, and insights that steer it
(read from the rendered memory block only: names, directions, speedups, problems)."""

from __future__ import annotations

from llm_helpers import scale_add_problem

from accelopt.catalog import RetrievedInsight
from accelopt.records import ChatMessage
from actors.llm.parsing import extract_code, parse_insight
from actors.llm.role_table import render, tuner_reply
from actors.llm.tuner import (
    compound_move,
    hint_preferences,
    insight_moves,
    parse_insights,
    rank_moves,
)
from hardware_agents.languages.tunables import (
    Change,
    apply_changes,
    find_tunables,
    legal_values,
    moves,
    parse_changes,
)
from memory_index import format_for_prompt

V2_KERNEL = """\
/* a kernel whose constants declare their legal values */
#include <stddef.h>

#define TILE_N 32      // tune: TILE_N in {16, 32, 64, 128, 256}
#define UNROLL 2       // tune: UNROLL in {1, 2, 4, 8}
#define FUSED 0        // tune: FUSED in {0, 1}
#define SCHED static   // tune: SCHED in {static, dynamic, guided}
#define ALPHA 2.0f

void kernel(const float* x, const float* y, float* out) {
    #pragma omp parallel for schedule(SCHED)
    for (int i = 0; i < M; i++)
        for (int j0 = 0; j0 < N; j0 += TILE_N)
            for (int j = j0; j < j0 + TILE_N && j < N; j++)
                out[(size_t)i * N + j] = ALPHA * x[(size_t)i * N + j] + y[(size_t)i * N + j];
}
"""


def _dicts(messages: list[ChatMessage]) -> list[dict]:
    return [{"role": m.role, "content": m.content} for m in messages]


def _insight(problem: str, speedup: float, title: str, text: str = "", entry: str = "e") -> RetrievedInsight:
    return RetrievedInsight(
        entry_id=entry,
        problem=problem,
        device="cpu",
        language="c",
        speedup=speedup,
        title=title,
        text=text or f"**{title}**\nfaster",
    )


def plan(source: str = V2_KERNEL, sample: int = 0, insights=()) -> str:
    msgs = render(
        "planner",
        "c",
        problem=scale_add_problem(),
        source=source,
        profile=None,
        insights=list(insights),
        device="cpu",
        seed=0,
        request_id="r",
    )
    return tuner_reply(_dicts(msgs), "planner", sample)


def test_legal_value_comments_make_switches_and_identifiers_tunable():
    assert legal_values(V2_KERNEL) == {
        "TILE_N": (16, 32, 64, 128, 256),
        "UNROLL": (1, 2, 4, 8),
        "FUSED": (0, 1),
        "SCHED": ("static", "dynamic", "guided"),
    }
    found = {t.name: t.value for t in find_tunables(V2_KERNEL, skip={"M", "N"})}
    assert found == {"TILE_N": 32, "UNROLL": 2, "FUSED": 0, "SCHED": "static"}
    by = {t.name: t for t in find_tunables(V2_KERNEL)}
    assert moves(by["TILE_N"], max_shape=None) == [Change("TILE_N", 32, 64), Change("TILE_N", 32, 16)]
    assert moves(by["FUSED"], None) == [Change("FUSED", 0, 1)]
    assert moves(by["SCHED"], None) == [
        Change("SCHED", "static", "dynamic"),
        Change("SCHED", "static", "guided"),
    ]
    # every move the planner can make stays inside the declared sets
    legal = legal_values(V2_KERNEL)
    for move in rank_moves(V2_KERNEL, skip={"M", "N"}, key="k"):
        for c in move:
            assert c.new in legal[c.name], c


def test_plans_move_several_constants_and_the_executor_applies_them_all():
    plans = [plan(sample=i) for i in range(12)]
    assert len(set(plans)) == 12  # twelve samples, twelve different moves
    multi = [p for p in plans if len(parse_changes(p)) > 1]
    assert multi, "no multi-constant move among the first 12 samples"
    p = multi[0]
    changes = parse_changes(p)
    assert p.startswith("**") and all(f"CHANGE: {c.name} {c.old} -> {c.new}" in p for c in changes)
    reply = tuner_reply(
        _dicts(render("executor", "c", problem=scale_add_problem(), source=V2_KERNEL, plan=p, device="cpu")),
        "executor",
    )
    code = extract_code(reply, entry="kernel").code
    expected, done = apply_changes(V2_KERNEL, changes)
    assert code == expected and len(done) == len(changes)
    for c in changes:
        assert f"#define {c.name} {c.new}" in code


def test_an_insight_is_tried_first_with_its_target_value():
    ins = _insight("other_problem", 2.5, "Increase TILE_N (32 -> 128), increase UNROLL (2 -> 8)")
    first = parse_changes(plan(insights=[ins]))
    assert set(first) == {Change("TILE_N", 32, 128), Change("UNROLL", 2, 8)}
    text = plan(insights=[ins])
    assert "Insight 1 of the memory" in text and "2.50x" in text
    # without the insight the first move is something else (exploration)
    assert set(parse_changes(plan())) != set(first)


def _insight_weights(hints, source: str = V2_KERNEL) -> dict:
    return {
        im.move: im.weight
        for im in insight_moves(find_tunables(source, {"M", "N"}), hints, "scale_add", None)
    }


def test_insights_weighted_by_speedup_and_similarity():
    small_same = _insight("scale_add", 1.3, "Increase UNROLL (2 -> 4)", entry="a")
    big_other = _insight("other", 3.0, "Decrease TILE_N (32 -> 16)", entry="b")
    hints = parse_insights(format_for_prompt([small_same, big_other]))
    assert [h.problem for h in hints] == ["scale_add", "other"] and hints[1].speedup == 3.0
    # the bigger measured gain weighs more (log 3.0 x 0.6 elsewhere > log 1.3 here)
    tile, unroll = (Change("TILE_N", 32, 16),), (Change("UNROLL", 2, 4),)
    w = _insight_weights(hints)
    assert w[tile] > w[unroll]
    # the two combine into one move, the stronger first, and the first sample takes it on every
    # kernel; the single insights follow within the next four samples
    for i in range(20):
        src = V2_KERNEL.replace("a kernel", f"kernel {i}")
        ranked = rank_moves(src, skip={"M", "N"}, hints=hints, problem="scale_add", key=str(i))
        assert ranked[0] == tile + unroll and tile in ranked[1:5] and unroll in ranked[1:5]
    # the same insight measured on this very problem outweighs one from elsewhere
    same = parse_insights(
        format_for_prompt(
            [
                _insight("other", 1.5, "Decrease TILE_N (32 -> 16)", entry="d"),
                _insight("scale_add", 1.5, "Increase UNROLL (2 -> 4)", entry="c"),
            ]
        )
    )
    w = _insight_weights(same)
    assert w[unroll] > w[tile]
    assert (
        rank_moves(V2_KERNEL, skip={"M", "N"}, hints=same, problem="scale_add", key="k")[0] == unroll + tile
    )


def test_a_compound_move_applies_the_strongest_insights_on_distinct_constants():
    """Three insights become one move (what following them one per iteration reaches after
    three), merged constant by constant: the stronger insight decides a constant both name,
    and an insight with nothing left to add stays out."""
    found = [
        _insight("gemm_a", 8.0, "Increase UNROLL (2 -> 8)", entry="u"),
        _insight("gemm_b", 2.0, "Increase TILE_N (32 -> 128)", entry="t"),
        _insight("gemm_c", 1.6, "Decrease UNROLL (8 -> 4)", entry="u2"),
        _insight("gemm_d", 1.4, "Increase FUSED (0 -> 1), decrease TILE_N (32 -> 16)", entry="f"),
        _insight("gemm_e", 1.2, "Set SCHED (static -> dynamic)", entry="s"),
    ]
    hints = parse_insights(format_for_prompt(found))
    compound = compound_move(insight_moves(find_tunables(V2_KERNEL, {"M", "N"}), hints, "scale_add", None))
    assert compound is not None
    assert compound.move == (Change("UNROLL", 2, 8), Change("TILE_N", 32, 128), Change("FUSED", 0, 1))
    assert [h.rank for h in compound.hints] == [1, 2, 4]
    text = plan(insights=found)
    assert set(parse_changes(text)) == set(compound.move)
    assert "insights 1, 2 and 4 of the memory" in text and "8.00x on `gemm_a`" in text
    # one insight alone is no compound; an insight applied already only suggests a further step,
    # which a compound leaves out
    one = parse_insights(format_for_prompt(found[:1]))
    assert compound_move(insight_moves(find_tunables(V2_KERNEL, {"M", "N"}), one, "scale_add", None)) is None
    applied = V2_KERNEL.replace("#define UNROLL 2 ", "#define UNROLL 8 ")
    moves_applied = insight_moves(find_tunables(applied, {"M", "N"}), hints[:2], "scale_add", None)
    assert compound_move(moves_applied) is None


def test_a_switch_past_the_insights_target_goes_to_the_target():
    """The numbers of a switch such as a loop order have no direction: an insight `4 -> 2` on a
    kernel at 1 (no legal value below it) proposes 2 (it used to propose nothing)."""
    switch = V2_KERNEL.replace(
        "#define FUSED 0        // tune: FUSED in {0, 1}",
        "#define ORDER 1        // tune: ORDER in {1, 2, 4}",
    )
    ins = _insight("gemm", 1.9, "Decrease ORDER (4 -> 2)")
    assert parse_changes(plan(source=switch, insights=[ins])) == [Change("ORDER", 1, 2)]
    # where a further step exists, an applied insight still takes it (an ordered knob)
    at_two = switch.replace("#define ORDER 1 ", "#define ORDER 4 ")
    assert parse_changes(
        plan(source=at_two, insights=[_insight("gemm", 1.9, "Increase ORDER (1 -> 2)")])
    ) == [Change("ORDER", 4, 2)]


def test_the_memory_never_takes_every_sample():
    """Insight moves alternate with exploration: with many insights from other problems, the
    second sample of a kernel is still its own exploration (what a memory-off run tries)."""
    many = [
        _insight("other", 2.0 + i / 10, f"Increase UNROLL (2 -> {2 ** (i % 2 + 2)})", entry=f"u{i}")
        for i in range(6)
    ]
    hints = parse_insights(format_for_prompt(many))
    insight_moves = {(Change("UNROLL", 2, 4),), (Change("UNROLL", 2, 8),)}
    own = 0
    for i in range(20):
        ranked = rank_moves(
            V2_KERNEL.replace("a kernel", f"k{i}"),
            skip={"M", "N"},
            hints=hints,
            problem="scale_add",
            key=str(i),
        )
        assert ranked[0] in insight_moves
        own += not any(c.name == "UNROLL" for c in ranked[1])
    # exploration prefers the insights' direction (x6), but six insights do not compound to
    # x6**6 (which left no other constant a chance): on this small kernel about a third of the
    # second samples still explore another constant
    assert own >= 5


def test_a_partly_applicable_insight_pulls_in_proportion():
    """An insight about two constants of which this kernel has one pulls half as hard as an
    equal one it can apply whole."""
    partial = _insight("other", 3.0, "Increase NOT_HERE (1 -> 2), decrease TILE_N (32 -> 16)", entry="p")
    whole = _insight("other", 2.2, "Increase UNROLL (2 -> 4)", entry="w")
    hints = parse_insights(format_for_prompt([partial, whole]))
    unroll, tile = (Change("UNROLL", 2, 4),), (Change("TILE_N", 32, 16),)
    w = _insight_weights(hints)
    assert w[unroll] > w[tile]
    assert (
        rank_moves(V2_KERNEL, skip={"M", "N"}, hints=hints, problem="scale_add", key="k")[0] == unroll + tile
    )
    alone = parse_insights(format_for_prompt([partial]))
    assert rank_moves(V2_KERNEL, skip={"M", "N"}, hints=alone, problem="scale_add", key="k")[0] == tile


def test_applied_insight_suggests_a_further_step_and_slowdowns_push_back():
    applied = V2_KERNEL.replace("#define TILE_N 32 ", "#define TILE_N 128")
    ins = _insight("x", 2.0, "Increase TILE_N (32 -> 128)")
    assert parse_changes(plan(source=applied, insights=[ins])) == [Change("TILE_N", 128, 256)]
    slow = _insight("x", 0.6, "Increase UNROLL (2 -> 4)")
    first = parse_changes(plan(insights=[slow]))
    assert first == [Change("UNROLL", 2, 1)]


def test_insight_as_a_unified_diff_is_understood():
    diff = (
        "Tiling the columns more widely keeps the rows in L1.\n\n```diff\n--- slow\n+++ fast\n@@ -3,3 +3,3 @@\n"
        "-#define TILE_N 32      // tune: TILE_N in {16, 32, 64, 128, 256}\n"
        "+#define TILE_N 64      // tune: TILE_N in {16, 32, 64, 128, 256}\n"
        " #define UNROLL 2\n```\n"
    )
    ins = _insight("y", 1.8, "Wider column tiles", text=diff)
    [h] = parse_insights(format_for_prompt([ins]))
    assert h.changes == (Change("TILE_N", 32, 64),) and h.speedup == 1.8 and not h.slowdown
    assert parse_changes(plan(insights=[ins])) == [Change("TILE_N", 32, 64)]


def test_summarizer_names_every_changed_constant_and_round_trips_to_the_planner():
    fast = V2_KERNEL.replace("#define TILE_N 32 ", "#define TILE_N 128").replace(
        "#define FUSED 0", "#define FUSED 1"
    )
    msgs = render(
        "summarizer",
        "c",
        problem=scale_add_problem(),
        slow_source=V2_KERNEL,
        fast_source=fast,
        speedup=2.2,
        positive=True,
        device="cpu",
    )
    ins = parse_insight(tuner_reply(_dicts(msgs)))
    assert ins.title == "Increase TILE_N (32 -> 128), increase FUSED (0 -> 1)"
    assert "Tuned constants: TILE_N 32 -> 128 (increase); FUSED 0 -> 1 (increase)." in ins.text
    assert "2.200x faster" in ins.text
    entry = _insight("scale_add", 2.2, ins.title, ins.text)
    [h] = parse_insights(format_for_prompt([entry]))
    assert set(h.changes) == {Change("TILE_N", 32, 128), Change("FUSED", 0, 1)}
    assert set(parse_changes(plan(insights=[entry]))) == {Change("TILE_N", 32, 128), Change("FUSED", 0, 1)}


def test_plans_are_deterministic_per_prompt_and_sample():
    ins = [_insight("x", 1.5, "Increase UNROLL (2 -> 4)")]
    assert [plan(sample=i, insights=ins) for i in range(5)] == [
        plan(sample=i, insights=ins) for i in range(5)
    ]
    assert plan(sample=0, insights=ins) != plan(sample=1, insights=ins)


def test_a_compound_leaves_out_jumps_across_scales():
    """An insight from a kernel where a constant of the same name counts something else
    (CHUNK 2 -> 1 on a GEMM's blocks, on a kernel at 1024 elements) may be tried alone, but is
    not compounded with the others: one such jump made a compound 5x slower than the baseline."""
    chunked = V2_KERNEL.replace(
        "#define UNROLL 2       // tune: UNROLL in {1, 2, 4, 8}",
        "#define UNROLL 2       // tune: UNROLL in {1, 2, 4, 8}\n"
        "#define CHUNK 1024     // tune: CHUNK in {1, 2, 4, 256, 512, 1024, 2048}",
    )
    found = [
        _insight("gemm", 3.0, "Decrease CHUNK (2 -> 1)", entry="c"),
        _insight("other", 2.0, "Increase UNROLL (2 -> 4)", entry="u"),
        _insight("other2", 1.5, "Increase TILE_N (32 -> 64)", entry="t"),
    ]
    hints = parse_insights(format_for_prompt(found))
    items = insight_moves(find_tunables(chunked, {"M", "N"}), hints, "scale_add", None)
    assert (Change("CHUNK", 1024, 1),) in [im.move for im in items]  # still a move of its own
    compound = compound_move(items)
    assert compound is not None
    assert compound.move == (Change("UNROLL", 2, 4), Change("TILE_N", 32, 64))
    assert [h.rank for h in compound.hints] == [2, 3]


def test_a_slowdown_of_several_constants_steers_nothing():
    """Which of several constants changed together made a kernel slower is unknown: such an
    insight proposes no move back and weighs on no direction; a one-constant slowdown does."""
    both = _insight("x", 0.5, "Increase UNROLL (2 -> 4), increase TILE_N (32 -> 64)", entry="b")
    [h] = parse_insights(format_for_prompt([both]))
    assert h.slowdown and not h.telling
    assert insight_moves(find_tunables(V2_KERNEL, {"M", "N"}), [h], "scale_add", None) == []
    assert hint_preferences([h]) == {}
    [one] = parse_insights(format_for_prompt([_insight("x", 0.5, "Increase UNROLL (2 -> 4)")]))
    assert one.telling and hint_preferences([one])[("UNROLL", "Decrease")] > 1
