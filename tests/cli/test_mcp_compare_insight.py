"""compare_kernels measures two kernels as `accelopt remeasure` does (interleaved rounds on
fresh seeds) and verifies a slow->fast pair only where both pass every round and the fast one
is faster; record_insight writes an insight into the shared memory only on such a pair (and
once), where search_memory and `accelopt memory search` (what a run's planner reads) find it
with its provenance; the session log holds the rounds, the insight and the memory entry it made
(`AgentMemoryEntryAdded`: the report lists it, `memory rebuild` projects it) and still verifies."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import anyio
import msgspec
import pytest
from mcp_session import ACCELOPT, REPO, stdio_session, text_of

from accelopt import catalog as ev
from accelopt.kernel_id import kernel_id
from events.logfile import read_events

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]

SILU = (REPO / "suites" / "cpu_v2" / "silu" / "baseline.c").read_text()
# the fixed edit a coding agent would send: the inline polynomial exp on whole vectors
FAST = SILU.replace("#define EXP_IMPL 1", "#define EXP_IMPL 2").replace("#define VEC 4", "#define VEC 8")
SEGFAULT = "void kernel(const float* x, float* out) { *(volatile int*)0 = 1; }\n"


def test_compare_verify_record_and_retrieve(tmp_path: Path) -> None:
    root = tmp_path / "runs"
    assert FAST != SILU
    out: dict = {}

    async def scenario() -> None:
        async with stdio_session(root) as c:
            r = await c.call_tool(
                "compare_kernels",
                {"problem": "cpu_v2/silu", "slow_source": SILU, "fast_source": FAST, "rounds": 2},
            )
            res = r.structured_content
            assert not r.is_error, text_of(r)
            assert res["slow"]["kernel_id"] == kernel_id("silu", "c", SILU)
            assert res["fast"]["kernel_id"] == kernel_id("silu", "c", FAST)
            assert len(res["slow"]["rounds_ms"]) == len(res["fast"]["rounds_ms"]) == 2 == len(res["seeds"])
            assert res["verified"] and res["speedup"] >= 1.05 and res["pair_id"], res
            assert "verified" in text_of(r)
            out["compare"] = res

            # not verified: a failing side, the sides reversed (slower), the same kernel twice
            r = await c.call_tool(
                "compare_kernels",
                {"problem": "cpu_v2/silu", "slow_source": SILU, "fast_source": SEGFAULT, "rounds": 1},
            )
            assert not r.is_error and not r.structured_content["verified"]
            assert (
                r.structured_content["fast"]["status"] == "runtime_error"
                and "pair_id" not in r.structured_content
            )
            r = await c.call_tool(
                "compare_kernels",
                {"problem": "cpu_v2/silu", "slow_source": FAST, "fast_source": SILU, "rounds": 1},
            )
            assert not r.structured_content["verified"] and r.structured_content["speedup"] < 1
            r = await c.call_tool(
                "compare_kernels", {"problem": "cpu_v2/silu", "slow_source": SILU, "fast_source": SILU}
            )
            assert r.is_error and "same kernel" in text_of(r)

            # an insight needs a pair this judge verified
            r = await c.call_tool(
                "record_insight", {"pair_id": "0" * 32, "title": "free-standing", "text": "trust me"}
            )
            assert r.is_error and "not verified" in text_of(r) and "\n" not in text_of(r)
            assert not (root / "memory").exists() or not any((root / "memory").iterdir())

            args = {
                "pair_id": res["pair_id"],
                "title": "Vectorized polynomial exp for SiLU",
                "text": "Replace libm expf per lane (EXP_IMPL 1) with the inline polynomial exp on whole "
                "vectors (EXP_IMPL 2) and widen vectors to 8 floats.",
            }
            r = await c.call_tool("record_insight", args)
            assert not r.is_error and r.structured_content["written"], text_of(r)
            entry = r.structured_content["entry"]
            out["entry"] = entry
            out["event_id"] = r.structured_content["event_id"]
            assert (
                entry["speedup"] == res["speedup"]
                and entry["slow_kernel"] == SILU
                and entry["fast_kernel"] == FAST
            )
            r = await c.call_tool("record_insight", args)  # once only
            assert not r.is_error and not r.structured_content["written"]

            r = await c.call_tool("search_memory", {"query": "silu exp polynomial vectorized"})
            hits = r.structured_content["hits"]
            assert not r.is_error and [h["entry_id"] for h in hits] == [entry["id"]]
            (hit,) = hits
            assert (
                hit["source_run"] == entry["source_run"]
                and hit["problem"] == "silu"
                and hit["device"] == "cpu"
            )
            assert (
                hit["slow_kernel_id"] == res["slow"]["kernel_id"]
                and hit["fast_kernel_id"] == res["fast"]["kernel_id"]
            )
            assert "EXP_IMPL 2" in hit["diff"]
            r = await c.call_tool("search_memory", {"kernel": SILU, "problem": "cpu_v2/silu"})
            assert [h["entry_id"] for h in r.structured_content["hits"]] == [entry["id"]]

    anyio.run(scenario)
    session = out["entry"]["source_run"]
    # the memory a run reads (its planner's retrieval) has it
    cli = subprocess.run(
        [
            ACCELOPT,
            "memory",
            "search",
            "silu exp",
            "--uri",
            str(root / "memory"),
            "--device",
            "cpu",
            "--json",
        ],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=120,
    )
    assert cli.returncode == 0, cli.stderr
    assert out["entry"]["id"] in cli.stdout
    events = read_events(root / session / "log.aolog")
    (insight,) = [e for e in events if isinstance(e, ev.InsightSummarized)]
    assert insight.request_id == out["compare"]["event_id"] and insight.title.startswith("Vectorized")
    rounds = [e for e in events if isinstance(e, ev.KernelProfiled) and e.request_id == insight.request_id]
    assert len(rounds) == 4 and {e.kernel_id for e in rounds} == {
        out["compare"]["slow"]["kernel_id"],
        out["compare"]["fast"]["kernel_id"],
    }
    # the seeds the result names are the ones each round's profiles were checked on
    cases = {c.case for e in rounds for c in e.profile.correctness}
    assert all(f"seed{seed}" in cases for seeds in out["compare"]["seeds"] for seed in seeds), cases
    # the entry is an event of the session's log, caused by the insight, naming its client
    (added,) = [e for e in events if isinstance(e, ev.AgentMemoryEntryAdded)]
    assert msgspec.to_builtins(added.entry) == out["entry"] and added.client == "pytest-agent 1.0"
    assert added.causation_id == insight.event_id and added.event_id == out["event_id"]
    verify = subprocess.run(
        [ACCELOPT, "replay", session, "--root", str(root), "--verify"],
        capture_output=True,
        text=True,
        cwd=REPO,
    )
    assert verify.returncode == 0, verify.stdout + verify.stderr
    report = subprocess.run(
        [ACCELOPT, "report", session, "--root", str(root)],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=120,
    )
    assert report.returncode == 0, report.stderr
    assert "Vectorized polynomial exp for SiLU" in (root / session / "report.html").read_text()
    # the memory is a projection of the logs: rebuilt from the session's alone, it has the entry
    rebuilt = subprocess.run(
        [
            ACCELOPT,
            "memory",
            "rebuild",
            str(root / session / "log.aolog"),
            "--uri",
            str(tmp_path / "rebuilt"),
        ],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=300,
    )
    assert rebuilt.returncode == 0 and "1 entries written" in rebuilt.stdout, rebuilt.stdout + rebuilt.stderr
    json.dumps(out)  # the results are plain JSON
