"""`accelopt mcp --http` with the real `mcp` client: the token rule (no listening beyond
loopback without a bearer token; no request served without it where one is set), every tool
over HTTP with bad input as one-line errors, and two sessions profiling at once, each verdict
in the log once, naming its client."""

from __future__ import annotations

import subprocess
from pathlib import Path

import anyio
import httpx2
import pytest
from mcp_session import ACCELOPT, REPO, free_port, http_server, http_session, text_of

from accelopt import catalog as ev
from events.logfile import read_events

pytestmark = pytest.mark.timeout(600)
TOKEN = "s3cr3t-" + "x" * 25
SILU = (REPO / "suites" / "cpu_v2" / "silu" / "baseline.c").read_text()
SEGFAULT = "void kernel(const float* x, float* out) { *(volatile int*)0 = 1; }\n"


def refused(root: Path, listen: str, env_token: str | None) -> subprocess.CompletedProcess[str]:
    import os

    env = {k: v for k, v in os.environ.items() if k != "ACCELOPT_MCP_TOKEN"}
    if env_token is not None:
        env["ACCELOPT_MCP_TOKEN"] = env_token
    return subprocess.run(
        [ACCELOPT, "mcp", "--root", str(root), "--http", listen],
        capture_output=True,
        text=True,
        cwd=REPO,
        env=env,
        timeout=60,
    )


def test_no_listening_beyond_loopback_without_a_token(tmp_path: Path) -> None:
    root = tmp_path / "runs"
    port = free_port()
    for listen, token, says in [
        (f"0.0.0.0:{port}", None, "beyond loopback"),
        (f"[::]:{port}", None, "beyond loopback"),
        (f"accelopt.example:{port}", None, "beyond loopback"),
        (f"0.0.0.0:{port}", "short", "too short"),
        ("127.0.0.1", None, "HOST:PORT"),
    ]:
        out = refused(root, listen, token)
        assert out.returncode == 2 and out.stdout == "", (listen, out)
        lines = out.stderr.strip().splitlines()
        assert len(lines) == 1 and says in lines[0] and "Traceback" not in out.stderr, (listen, out.stderr)
    assert not root.exists()  # nothing was created


def test_the_token_guards_every_request_and_every_tool_answers(tmp_path: Path) -> None:
    root = tmp_path / "runs"
    port = free_port()
    url = f"http://127.0.0.1:{port}/mcp"
    # beyond loopback with a token: it listens (on every address), and asks for the token
    with http_server(root, f"0.0.0.0:{port}", TOKEN):
        for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": TOKEN}):
            r = httpx2.post(url, json={"jsonrpc": "2.0", "id": 1, "method": "ping"}, headers=headers)
            assert r.status_code == 401 and "Bearer" in r.headers["www-authenticate"], headers

        async def scenario() -> None:
            async with http_session(url, TOKEN) as c:
                names = {t.name for t in (await c.list_tools()).tools}
                assert names == {
                    "list_problems",
                    "get_problem",
                    "profile_kernel",
                    "compare_kernels",
                    "record_insight",
                    "search_memory",
                    "start_run",
                    "watch_run",
                    "stop_run",
                    "start_campaign",
                    "watch_campaign",
                    "stop_campaign",
                    "replay_run",
                    "report_run",
                }
                r = await c.call_tool("list_problems", {"suite": "cpu_v2", "op_type": "activation"})
                assert [p["ref"] for p in r.structured_content["problems"]] == ["cpu_v2/silu"]
                r = await c.call_tool("get_problem", {"problem": "cpu_v2/silu"})
                assert r.structured_content["roofline"]["t_peak_ms"] > 0
                r = await c.call_tool("profile_kernel", {"problem": "cpu_v2/silu", "source": SEGFAULT})
                assert r.structured_content["status"] == "runtime_error"
                r = await c.call_tool(
                    "compare_kernels",
                    {"problem": "cpu_v2/silu", "slow_source": SEGFAULT, "fast_source": SILU, "rounds": 1},
                )
                assert not r.is_error and not r.structured_content["verified"]
                r = await c.call_tool("record_insight", {"pair_id": "nope", "title": "t", "text": "x"})
                assert r.is_error and "not verified" in text_of(r)
                r = await c.call_tool("search_memory", {"query": "anything"})
                assert not r.is_error and r.structured_content["hits"] == []
                r = await c.call_tool("get_problem", {"problem": "cpu_v2/silu", "junk": True})
                assert r.is_error and "junk" in text_of(r) and "\n" not in text_of(r)
                for tool, args, says in [
                    ("start_campaign", {"problems": ["cpu_v2/nope"], "budget_usd": 1.0}, "nope"),
                    ("watch_campaign", {"campaign_id": "c-20990101-000000-beef"}, "c-20990101-000000-beef"),
                    (
                        "stop_campaign",
                        {"campaign_id": "c-20990101-000000-beef"},
                        "not started by this server",
                    ),
                    ("replay_run", {"run_id": "../x"}, "bad arguments"),
                    ("report_run", {"run_id": "20990101-000000-beef"}, "no run, agent session or campaign"),
                ]:
                    r = await c.call_tool(tool, args)
                    assert r.is_error and says in text_of(r) and "\n" not in text_of(r), (tool, text_of(r))

        anyio.run(scenario)


def test_two_sessions_profile_at_once(tmp_path: Path) -> None:
    root = tmp_path / "runs"
    port = free_port()
    url = f"http://127.0.0.1:{port}/mcp"
    with http_server(root, f"127.0.0.1:{port}", TOKEN):
        got: dict[str, str] = {}

        async def agent(name: str, source: str) -> None:
            async with http_session(url, TOKEN, name=name) as c:
                r = await c.call_tool("profile_kernel", {"problem": "cpu_v2/silu", "source": source})
                assert not r.is_error, text_of(r)
                got[name] = r.structured_content["event_id"]

        async def scenario() -> None:
            async with anyio.create_task_group() as tg:
                tg.start_soon(agent, "agent-a", SILU)
                tg.start_soon(agent, "agent-b", SEGFAULT)

        anyio.run(scenario)
    (session,) = [p for p in root.iterdir() if (p / "log.aolog").exists()]
    profiled = [e for e in read_events(session / "log.aolog") if isinstance(e, ev.KernelProfiled)]
    assert sorted(e.event_id for e in profiled) == sorted(got.values())
    by_who = {e.worker.rpartition(" for ")[2]: e.profile.status for e in profiled}
    assert by_who == {"agent-a 1.0": "passed", "agent-b 1.0": "runtime_error"}
