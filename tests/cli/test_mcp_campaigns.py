"""start_campaign, watch_campaign, stop_campaign over the real client (stdio): a real `accelopt
campaign run` (Ray, NATS, the offline tuner) started through the tools under the server's root
and memory with its budget, followed as `accelopt campaign status` sees it, stopped by SIGTERM
(its driver gone, the campaign no longer running), then replayed (`replay_run`) as `accelopt
replay ID --verify` would. Bad arguments, problems of no registered suite, a campaign the
server did not start, and unknown campaigns are one-line tool errors that start nothing."""

from __future__ import annotations

import json
import time
from pathlib import Path

import anyio
import pytest
from mcp_session import alive, stdio_session, text_of

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]


def test_start_watch_stop_a_campaign(tmp_path: Path) -> None:
    root = tmp_path / "runs"

    async def scenario() -> None:
        async with stdio_session(root) as c:
            for args, says in [
                ({"problems": ["cpu_v2/nope"], "budget_usd": 1.0}, "nope"),
                ({"problems": ["../../elsewhere/p"], "budget_usd": 1.0}, "registered suite"),
                ({"problems": ["cpu_v2/silu@trn9"], "budget_usd": 1.0}, "trn9"),
                ({"problems": ["cpu_v2/silu"], "budget_usd": -1.0}, "bad arguments"),
                ({"problems": ["cpu_v2/silu"]}, "bad arguments"),  # no budget
                ({"problems": [], "budget_usd": 1.0}, "bad arguments"),
                (
                    {
                        "problems": ["cpu_v2/silu"],
                        "budget_usd": 1.0,
                        "set": ["sandbox.allow_unisolated=true"],
                    },
                    "bad arguments",
                ),
                ({"problems": ["cpu_v2/silu"], "budget_usd": 1.0, "policy": "greedy"}, "scheduler.policy"),
            ]:
                r = await c.call_tool("start_campaign", args)
                text = text_of(r)
                assert r.is_error and says in text and "\n" not in text, (args, text)
            assert not (root / "campaigns").exists()  # nothing was started
            for tool in ("watch_campaign", "stop_campaign"):
                r = await c.call_tool(tool, {"campaign_id": "nightly-20990101-000000-beef"})
                assert r.is_error and "\n" not in text_of(r), text_of(r)
                r = await c.call_tool(tool, {"campaign_id": "../x"})
                assert r.is_error and "bad arguments" in text_of(r)

            r = await c.call_tool(
                "start_campaign",
                {
                    "problems": ["cpu_v2/silu"],
                    "budget_usd": 0.5,
                    "iterations": 1,
                    "max_runs": 1,
                    "name": "mcp",
                },
            )
            assert not r.is_error, text_of(r)
            started = r.structured_content
            cid, pid = started["campaign_id"], started["pid"]
            assert cid.startswith("mcp-") and alive(pid), started
            assert started["state"] in ("starting", "running"), started
            assert (root / "campaigns" / cid / "run.lock").is_file()
            (spec_file,) = list(
                root.glob("*/campaign-*.yaml")
            )  # written by the server, in the session's folder
            spec = json.loads(spec_file.read_text())
            assert spec["budget"]["total_usd"] == 0.5 and spec["memory"] == str((root / "memory").resolve())
            assert spec["problems"] == ["cpu_v2/silu@cpu"] and spec["devices"]["cpu"]["set"] == [
                "search.iterations=1"
            ]

            deadline = time.monotonic() + 300  # its first events: once its driver has read the file
            while True:
                r = await c.call_tool("watch_campaign", {"campaign_id": cid})
                watched = r.structured_content
                assert not r.is_error and watched["state"] in ("starting", "running"), watched
                if watched["state"] == "running" and watched.get("items"):
                    break
                assert time.monotonic() < deadline, watched
                await anyio.sleep(1.0)
            assert cid in text_of(r) and watched["pid"] == pid
            assert watched["budget_usd"] == 0.5 and [i["item"] for i in watched["items"]] == [
                "cpu_v2/silu@cpu"
            ]

            r = await c.call_tool("stop_campaign", {"campaign_id": cid})
            stopped = r.structured_content
            assert not r.is_error and stopped["state"] not in ("starting", "running"), stopped
            assert "pid" not in stopped
            deadline = time.monotonic() + 60
            while alive(pid) and time.monotonic() < deadline:
                await anyio.sleep(0.2)
            assert not alive(pid)

            assert stopped["state"] == "interrupted" and "campaign resume" in stopped["resume"], stopped
            r = await c.call_tool("replay_run", {"run_id": cid})
            res = r.structured_content
            assert not r.is_error and res["kind"] == "campaign" and res["verified"], text_of(r)
            assert res["decisions_checked"] >= 1, res

    anyio.run(scenario)
