"""What a planner sees of another chip's insights (real LanceDB, real all-MiniLM-L6-v2):
nothing by default; with `memory.cross_device_share` > 0, insights of the same operator only,
marked in its prompt as another chip's; `planner_sees` is the rule retrieval follows."""

from __future__ import annotations

from accelopt.config import MemoryConfig
from actors.llm.role_table import render
from memory_index import SearchQuery
from memory_index.retrieval import planner_sees
from suites import get_problem

QUERY = "activation: silu\nTile the free dimension wider so each DMA transfer moves more data."


def _nki_silu(make_entry, n: int = 2) -> list:
    texts = [
        "Fuse exp, add and divide into one activation.",
        "Wider tiles per DMA transfer.",
        "Keep the tile in SBUF between the two passes.",
        "Spread the rows over all 128 partitions.",
    ]
    return [
        make_entry(
            f"**NKI silu {i}**",
            texts[i],
            problem="silu",
            op_type="activation",
            device="trn1",
            language="nki",
        )
        for i in range(n)
    ]


def _c(make_entry, title: str, text: str, op_type: str, problem: str) -> object:
    return make_entry(title, text, problem=problem, op_type=op_type, device="cpu", language="c", speedup=3.0)


def _retrieve(memory, *, share: float, top_m: int = 4) -> list:
    return memory.retrieve(
        QUERY, device="trn1", language="nki", op_type="activation", top_m=top_m, cross_device_share=share
    )


def test_by_default_a_planner_sees_no_insight_of_another_chip(memory, make_entry):
    cpu_silu = _c(
        make_entry, "**Inline polynomial exp**", "Replace expf by a polynomial.", "activation", "silu"
    )
    memory.upsert([*_nki_silu(make_entry, 1), cpu_silu])
    default = MemoryConfig()
    got = memory.retrieve(
        QUERY,
        device="trn1",
        language="nki",
        op_type="activation",
        top_m=default.top_m,
        cross_device_share=default.cross_device_share,
        same_device_only=default.same_device_only,
    )
    assert [e.language for e in got] == ["nki"]


def test_other_chip_slots_hold_insights_of_the_same_operator_only(memory, make_entry):
    own = _nki_silu(make_entry)
    # another operator's insight, closer to the query's words than the same operator's one
    gemm = _c(
        make_entry,
        "**Tile the free dimension wider**",
        "Tile the free dimension wider so each DMA transfer moves more data.",
        "gemm",
        "matmul",
    )
    silu = _c(
        make_entry, "**Inline polynomial exp on whole vectors**", "Replace libm expf.", "activation", "silu"
    )
    memory.upsert([*own, gemm, silu])
    # of the C insights, the closest by similarity alone
    assert memory.search(QUERY, SearchQuery(language="c"))[0].entry_id == gemm.id
    got = _retrieve(memory, share=0.5)
    assert [e.entry_id for e in got] == [*[e.entry_id for e in got[:2]], silu.id]
    assert {e.entry_id for e in got[:2]} == {e.id for e in own}


def test_slots_another_chip_does_not_fill_stay_with_the_own_chip(memory, make_entry):
    own = _nki_silu(make_entry, 4)
    gemm = _c(make_entry, "**Block the K loop**", "Block K for the cache.", "gemm", "matmul")
    memory.upsert([*own, gemm])
    got = _retrieve(memory, share=0.5)
    assert sorted(e.entry_id for e in got) == sorted(e.id for e in own)


def test_retrieval_follows_planner_sees(memory, make_entry):
    """Every entry of a mixed memory is retrieved (given slots enough) exactly when the rule
    the campaign scheduler counts by says the planner sees it."""
    entries = [
        *_nki_silu(make_entry),
        make_entry(
            "**trn2 silu**",
            "Bigger tiles on trn2.",
            problem="silu",
            op_type="activation",
            device="trn2",
            language="nki",
        ),
        make_entry(
            "**trn1 gemm**",
            "Transposed loads.",
            problem="matmul",
            op_type="gemm",
            device="trn1",
            language="nki",
        ),
        _c(make_entry, "**C silu**", "Polynomial exp.", "activation", "silu"),
        _c(make_entry, "**C gemm**", "i-k-j loop order.", "gemm", "matmul"),
        make_entry(
            "**Triton silu**",
            "Wider blocks.",
            problem="silu",
            op_type="activation",
            device="h100",
            language="triton",
        ),
    ]
    memory.upsert(entries)
    for share in (0.0, 0.5):
        for same_device_only in (False, True):
            got = memory.retrieve(
                QUERY,
                device="trn1",
                language="nki",
                op_type="activation",
                top_m=20,
                cross_device_share=share,
                same_device_only=same_device_only,
            )
            expected = {
                e.id
                for e in entries
                if planner_sees(
                    device="trn1",
                    language="nki",
                    op_type="activation",
                    entry_device=e.device,
                    entry_language=e.language,
                    entry_op_type=e.op_type,
                    cross_device_share=share,
                    same_device_only=same_device_only,
                )
            }
            assert {e.entry_id for e in got} == expected, (share, same_device_only)
    assert planner_sees(
        device="trn1",
        language="nki",
        op_type="activation",
        entry_device="cpu",
        entry_language="c",
        entry_op_type="activation",
        cross_device_share=0.25,
    )
    assert not planner_sees(
        device="trn1",
        language="nki",
        op_type="activation",
        entry_device="cpu",
        entry_language="c",
        entry_op_type="gemm",
        cross_device_share=0.25,
    )


def test_the_planner_prompt_marks_an_insight_of_another_chip(memory, make_entry):
    own = _nki_silu(make_entry, 1)
    silu = _c(
        make_entry, "**Inline polynomial exp on whole vectors**", "Replace libm expf.", "activation", "silu"
    )
    memory.upsert([*own, silu])
    got = _retrieve(memory, share=0.5, top_m=2)
    problem = get_problem("nki_tune/silu")
    system, user = render(
        "planner",
        "nki",
        problem=problem,
        source=problem.baseline.entry_file().content,
        insights=got,
        device="trn1",
        seed=1,
        request_id="r",
    )
    text = system.content + user.content
    block = text[text.index("# Experiences") :]
    first, second = block.split("\n## ")[1:3]
    assert "From another chip" not in first and "device trn1, language nki" in first
    assert "From another chip: learnt in c on cpu, not in nki on trn1." in second
