"""Memory as the planner sees it: retrieval within the kernel language and device family
(cross-device slots only when asked), ranking by similarity, speedup and recency, never a
run's own future, and insights shown whole with the slow -> fast diff they came from."""

from __future__ import annotations

import msgspec

from accelopt.catalog import RetrievedInsight
from memory_index import SearchQuery, format_for_prompt
from memory_index.retrieval import blended_rank, device_family, kernel_diff

SLOW = "\n".join([f"int line{i} = {i};" for i in range(200)]) + "\n"


def _ids(results):
    return [r.entry_id for r in results]


def test_the_diff_shows_changed_hunks_only_and_whole_hunks():
    fast = SLOW.replace("int line10 = 10;", "int line10 = 20;").replace(
        "int line150 = 150;", "long line150 = 1;"
    )
    d = kernel_diff(SLOW, fast)
    assert d.startswith("--- slow\n+++ fast\n@@") and sum(ln.startswith("@@") for ln in d.splitlines()) == 2
    assert "-int line10 = 10;\n+int line10 = 20;" in d and "+long line150 = 1;" in d
    assert "line100" not in d  # unchanged code stays out
    # bounded by whole hunks: the first fits, the second is counted, none is cut
    bounded = kernel_diff(SLOW, fast, max_lines=9)
    assert "+int line10 = 20;" in bounded and "line150" not in bounded
    assert bounded.endswith("... (1 more changed hunk not shown)")
    assert kernel_diff(SLOW, SLOW) == "" and kernel_diff("", fast) == ""
    assert "too large to show" in kernel_diff(SLOW, fast, max_lines=3)


def test_a_long_insight_loses_its_code_blocks_before_any_prose_and_never_mid_code():
    code = "\n".join(f"    acc{i} += x[i + {i}];" for i in range(120))
    text = (
        f"**Split the accumulator**\nFour partial sums hide the FMA latency.\n\n```c\n{code}\n```\n\n"
        "After the loop, add the four sums. The gain grows with the row length."
    )
    e = RetrievedInsight(
        entry_id="e",
        problem="rowsum",
        device="cpu",
        language="c",
        speedup=1.6,
        title="Split the accumulator",
        text=text,
        diff="--- slow\n+++ fast\n@@ -1 +1 @@\n-a\n+b",
    )
    block = format_for_prompt([e])
    assert "acc3 +=" not in block and "[code not shown: see the diff]" in block
    assert "After the loop, add the four sums." in block  # the prose after the code survives
    assert "```diff\n--- slow\n+++ fast\n@@ -1 +1 @@\n-a\n+b\n```" in block
    assert block.count("```") % 2 == 0  # every fence the model sees is closed
    short = msgspec.structs.replace(e, text="**Split the accumulator**\nUse `acc0..acc3`.\n```c\nint a;\n```")
    assert "```c\nint a;\n```" in format_for_prompt([short])  # a short insight keeps its code


def test_device_families():
    assert device_family("h100") == ("h100", "h200", "b200")
    assert device_family("trn2") == ("trn1", "trn2")
    assert device_family("my-plugin-dev") == ("my-plugin-dev",)


def test_retrieval_stays_in_language_and_family_unless_cross_slots_are_asked(memory, make_entry):
    texts = [
        "Tile the reduction so each block stays in fast memory.",
        "Double-buffer the loads of the next tile.",
        "Fuse the activation into the matmul epilogue.",
        "Use a larger free dimension per DMA transfer.",
        "Keep the running sum in PSUM across K tiles.",
        "Hoist the scale out of the inner loop.",
        "Unroll the row loop by four.",
        "Split the rows across all cores.",
        "Prefetch the weights early.",
    ]
    nki = [
        make_entry(f"**NKI insight {i}**", texts[i], device=d, language="nki", problem="silu")
        for i, d in enumerate(("trn1", "trn2"))
    ]
    c = [
        make_entry(f"**C insight {i}**", texts[2 + i], device="cpu", language="c", problem="silu")
        for i in range(6)
    ]
    tri = make_entry("**Triton insight**", texts[8], device="h100", language="triton", problem="silu")
    memory.upsert([*nki, *c, tri])
    got = memory.retrieve("silu reduction tiling", device="trn1", language="nki", op_type="silu", top_m=4)
    assert set(_ids(got)) == {e.id for e in nki}  # C-tuner insights do not crowd them out
    assert _ids(
        memory.retrieve("silu", device="trn1", language="nki", op_type="silu", top_m=4, same_device_only=True)
    ) == [nki[0].id]
    mixed = memory.retrieve(
        "silu reduction tiling",
        device="trn1",
        language="nki",
        op_type="silu",
        top_m=4,
        cross_device_share=0.5,
    )
    assert len(mixed) == 4 and set(_ids(mixed[:2])) == {e.id for e in nki}
    assert all(r.language != "nki" for r in mixed[2:])
    assert all(r.diff.startswith("--- slow\n+++ fast") for r in got)


def test_speedup_and_recency_move_equally_similar_insights(memory, make_entry):
    text = "Vectorize the inner loop with SIMD."
    small = make_entry("**Vectorize A**", text, speedup=1.05)
    big = make_entry("**Vectorize B**", text, speedup=1.9)
    memory.upsert([small, big])
    q = "vectorize the loop"
    ranked = memory.search(q, SearchQuery(collapse=False, speedup_weight=0.5))
    assert _ids(ranked) == [big.id, small.id]
    newer_small = make_entry("**Vectorize C**", text, speedup=1.05)  # created after big
    memory.upsert([newer_small])
    by_recency = memory.search(q, SearchQuery(collapse=False, recency_weight=1.0))
    assert _ids(by_recency)[0] == newer_small.id


def test_recency_ranks_by_creation_order_not_by_wall_clock_gaps():
    """A replay or ablation writes the same entries at other times: same order, same ranking."""
    sims = [0.80, 0.79, 0.78, 0.70]
    gains = [1.2, 1.0, 1.5, 1.1]
    recorded = [100.0, 101.0, 102.0, 103.0]
    later_with_other_gaps = [5000.0, 5900.0, 5901.0, 9000.0]
    for w in (0.05, 0.5, 1.0):
        a = blended_rank(sims, gains, recorded, speedup_weight=0.3, recency_weight=w)
        b = blended_rank(sims, gains, later_with_other_gaps, speedup_weight=0.3, recency_weight=w)
        assert a == b
    # the newest still wins when recency dominates; entries written at one instant share a place
    assert (
        blended_rank([0.5, 0.5, 0.5], [1.0] * 3, [1.0, 3.0, 2.0], speedup_weight=0, recency_weight=1)[0] == 1
    )
    assert blended_rank([0.6, 0.5], [1.0, 1.0], [7.0, 7.0], speedup_weight=0, recency_weight=1) == [0, 1]


def test_a_run_never_sees_its_own_future(memory, make_entry):
    past = make_entry("**Fuse the passes (other run)**", "Fuse the two passes.", source_run="older")
    emitted = make_entry("**Fuse the passes (mine, emitted)**", "Fuse the two passes again.", source_run="me")
    future = make_entry("**Fuse the passes (mine, later)**", "Fuse and unroll the passes.", source_run="me")
    parent = make_entry("**Fuse the passes (parent)**", "Fuse, unroll and tile.", source_run="parent")
    memory.upsert([past, emitted, future, parent])
    got = memory.retrieve(
        "fuse the passes",
        device="cpu",
        language="c",
        op_type="problem",
        top_m=10,
        exclude_source_runs=["me", "parent"],
        allow_ids=[emitted.id],
    )
    assert set(_ids(got)) == {past.id, emitted.id}
    assert set(
        _ids(memory.retrieve("fuse the passes", device="cpu", language="c", op_type="problem", top_m=10))
    ) == {
        past.id,
        emitted.id,
        future.id,
        parent.id,
    }
