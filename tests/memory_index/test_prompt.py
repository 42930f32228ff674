"""The planner's memory block and the retrieval query."""

from __future__ import annotations

from accelopt.catalog import RetrievedInsight
from memory_index import format_for_prompt, query_for


def test_prompt_block_shows_device_language_and_speedup():
    entries = [
        RetrievedInsight(
            entry_id="a",
            problem="rmsnorm_matmul",
            device="cpu",
            language="c",
            speedup=1.42,
            title="**Fuse the norm into the matmul**",
            text="**Fuse the norm into the matmul**\nScale rows while loading.\n" + "x" * 3000,
            score=0.8,
        ),
        RetrievedInsight(
            entry_id="b",
            problem="softmax",
            device="trn1",
            language="nki",
            speedup=0.8,
            title="Avoid a second pass",
            text="Keep the row in SBUF.",
            score=0.5,
        ),
    ]
    block = format_for_prompt(entries, max_chars_per_insight=200)
    assert block.startswith("# Experiences")
    assert "## 1. **Fuse the norm into the matmul**" in block
    assert "`rmsnorm_matmul`, device cpu, language c: 1.42x faster" in block
    assert "`softmax`, device trn1, language nki: 0.80x" in block
    assert block.count("Fuse the norm into the matmul") == 1  # the repeated title line is dropped
    assert "[...]" in block and "x" * 300 not in block
    assert format_for_prompt([]) == ""


def test_query_names_operator_and_problem_first():
    q = query_for("add_rmsnorm_matmul", "rmsnorm_matmul", "trn1", "nki", "def kernel(a, b):\n" + "y" * 5000)
    assert q.startswith("rmsnorm matmul: add rmsnorm matmul\ndef kernel(a, b):")
    assert len(q) < 1300
    assert "trn1" not in q and "nki" not in q
    assert query_for("softmax", "softmax") == "softmax"
