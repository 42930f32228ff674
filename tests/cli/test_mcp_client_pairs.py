"""On a shared HTTP server, a verified pair belongs to the client whose compare_kernels
verified it: its pair_id is drawn at random (the same two kernels compared by another client
give that client another pair_id), and another client (same token, same server) cannot attach
an insight to it even knowing its pair_id: neither a client of the stateless protocol nor one
with an MCP session (the legacy handshake, an `mcp-session-id`). Its own client can, and the
insight becomes an `AgentMemoryEntryAdded` of the server's session log naming that client,
its entry's `source_run` the session (one entry per pair of kernels: the other client's
insight on the same kernels finds it there), and the log still verifies (`accelopt replay
--verify`). Real server, real clients, real judge."""

from __future__ import annotations

import subprocess
from pathlib import Path

import anyio
import pytest
from mcp_session import ACCELOPT, REPO, free_port, http_server, http_session, text_of

from accelopt import catalog as ev
from events.logfile import read_events

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]
TOKEN = "pairs-" + "t" * 26
SILU = (REPO / "suites" / "cpu_v2" / "silu" / "baseline.c").read_text()
FAST = SILU.replace("#define EXP_IMPL 1", "#define EXP_IMPL 2").replace("#define VEC 4", "#define VEC 8")


def test_a_pair_is_its_own_client_s(tmp_path: Path) -> None:
    root = tmp_path / "runs"
    port = free_port()
    url = f"http://127.0.0.1:{port}/mcp"
    out: dict = {}
    insight = {"title": "Polynomial exp, 8 lanes", "text": "EXP_IMPL 2 on 8-float vectors instead of libm."}

    async def scenario() -> None:
        compare = {"problem": "cpu_v2/silu", "slow_source": SILU, "fast_source": FAST, "rounds": 1}
        async with (
            http_session(url, TOKEN, name="agent-a", mode="legacy") as a,
            http_session(url, TOKEN, name="agent-b") as b,
        ):
            r = await a.call_tool("compare_kernels", compare)
            assert not r.is_error and r.structured_content["verified"], text_of(r)
            pair_a = r.structured_content["pair_id"]
            r = await b.call_tool("compare_kernels", compare)
            assert not r.is_error and r.structured_content["verified"], text_of(r)
            pair_b = r.structured_content["pair_id"]
            assert pair_a != pair_b  # not derivable from the kernels

            for client, other in ((b, pair_a), (a, pair_b)):
                r = await client.call_tool("record_insight", {"pair_id": other, **insight})
                text = text_of(r)
                assert r.is_error and "this client's session" in text and "\n" not in text, text
            r = await b.call_tool("search_memory", {"query": "silu polynomial exp"})
            assert r.structured_content["hits"] == []  # nothing was written

            r = await a.call_tool("record_insight", {"pair_id": pair_a, **insight})
            assert not r.is_error and r.structured_content["written"], text_of(r)
            out["result"] = r.structured_content
            out["pair"] = pair_a
            r = await b.call_tool("record_insight", {"pair_id": pair_b, **insight})
            res = r.structured_content
            assert not r.is_error and not res["written"] and res["entry_id"] == out["result"]["entry_id"], res

    with http_server(root, f"127.0.0.1:{port}", TOKEN):
        anyio.run(scenario)
    (log,) = root.glob("*/log.aolog")
    events = read_events(log)
    (added,) = [e for e in events if isinstance(e, ev.AgentMemoryEntryAdded)]
    (said,) = [e for e in events if isinstance(e, ev.InsightSummarized)]
    assert added.client == "agent-a 1.0" and added.pair_id == out["pair"]
    assert added.event_id == out["result"]["event_id"] and added.causation_id == said.event_id
    assert added.entry.id == out["result"]["entry_id"] and added.entry.source_run == log.parent.name
    assert added.entry.title == insight["title"] and added.entry.fast_kernel == FAST
    verify = subprocess.run(
        [ACCELOPT, "replay", log.parent.name, "--root", str(root), "--verify"],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=120,
    )
    assert verify.returncode == 0 and "verified" in verify.stdout, verify.stdout + verify.stderr
