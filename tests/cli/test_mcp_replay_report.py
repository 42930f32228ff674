"""replay_run and report_run over the real client (stdio): a run, the agent's own session and a
campaign of the server's root, each re-derived as `accelopt replay ID --verify` re-derives it
(a log with an edited decision is a verdict, `verified: false` and where it parts, not an
error; a campaign verifies when its schedule and each of its runs do) or rendered as `accelopt
report ID` renders it, into its folder. An id the root does not know, a path for an id and
unknown keys are one-line tool errors. The runs and the campaign are written by the real
coordinator and scheduler cores over simulated worlds (replay/synthetic.py,
tests/shared/campaign_log.py): no LLM, profiler or Ray is needed to read a log."""

from __future__ import annotations

import subprocess
from pathlib import Path

import anyio
import msgspec
import pytest
from campaign_log import CID, synthetic_campaign
from mcp_session import ACCELOPT, REPO, stdio_session, text_of

from accelopt import catalog as ev
from events.logfile import write_events
from replay.synthetic import synthetic_run

pytestmark = pytest.mark.timeout(600)


def _edited(events: list[ev.Event]) -> list[ev.Event]:
    """The log with its first beam decision naming another best kernel."""
    i = next(i for i, e in enumerate(events) if isinstance(e, ev.BeamSelected))
    return [*events[:i], msgspec.structs.replace(events[i], best_kernel_id="edited"), *events[i + 1 :]]


def test_replay_and_report_runs_sessions_and_campaigns(tmp_path: Path) -> None:
    root = tmp_path / "runs"
    write_events(root / "run-ok" / "log.aolog", synthetic_run(run_id="run-ok", problems=1))
    write_events(root / "run-edited" / "log.aolog", _edited(synthetic_run(run_id="run-edited", problems=1)))
    campaign = synthetic_campaign()
    runs = [e.run for e in campaign if isinstance(e, ev.CampaignRunScheduled)]
    for run in runs:  # each of the campaign's runs: a run of its own with a log that verifies
        write_events(root / run / "log.aolog", synthetic_run(run_id=run, problems=1))
    write_events(root / "campaigns" / CID / "log.aolog", campaign)
    elsewhere = tmp_path / "elsewhere"
    write_events(elsewhere / "log.aolog", synthetic_run(run_id="elsewhere", problems=1))
    out: dict = {}

    async def scenario() -> None:
        async with stdio_session(root) as c:
            r = await c.call_tool("replay_run", {"run_id": "run-ok"})
            res = r.structured_content
            assert not r.is_error, text_of(r)
            assert res["verified"] and res["kind"] == "run" and res["decisions_checked"] > 10, res
            assert "verified" in text_of(r) and "run-ok" in text_of(r)

            r = await c.call_tool("replay_run", {"run_id": "run-edited"})
            res = r.structured_content
            assert not r.is_error and not res["verified"], res  # a verdict, not an error
            assert "BeamSelected" in res["divergence"] and "does not verify" in text_of(r)

            r = await c.call_tool("replay_run", {"run_id": CID})
            res = r.structured_content
            assert not r.is_error and res["kind"] == "campaign", text_of(r)
            assert res["verified"] and res["runs_verified"] == len(runs) and not res.get("runs_failed"), res
            (root / runs[0] / "log.aolog").unlink()  # a finished run whose log is gone
            r = await c.call_tool("replay_run", {"run_id": CID})
            res = r.structured_content
            assert not res["verified"] and res["runs_failed"] == [f"{runs[0]}: its log is missing"], res

            # the agent's own session: a log like a run's, replayed while it is written
            await c.call_tool("list_problems", {"suite": "cpu_v2"})
            known = {*runs, "run-ok", "run-edited", "campaigns", "memory"}
            (session,) = [p.name for p in root.iterdir() if p.is_dir() and p.name not in known]
            out["session"] = session
            r = await c.call_tool("replay_run", {"run_id": session})
            assert not r.is_error and r.structured_content["verified"], text_of(r)

            for run_id, kind in (("run-ok", "run"), (CID, "campaign"), (session, "run")):
                r = await c.call_tool("report_run", {"run_id": run_id})
                res = r.structured_content
                assert not r.is_error and res["kind"] == kind, text_of(r)
                folder = root / "campaigns" / CID if kind == "campaign" else root / run_id
                assert res["path"] == str(folder / "report.html") and res["size_bytes"] > 1000
                assert (folder / "report.html").read_bytes()[:15].lower().startswith(b"<!doctype html")

            # bad input: one line each, nothing read from outside the root
            for tool in ("replay_run", "report_run"):
                for args, says in [
                    ({"run_id": "20990101-000000-beef"}, "no run, agent session or campaign"),
                    ({"run_id": "../elsewhere"}, "bad arguments"),
                    ({"run_id": str(elsewhere / "log.aolog")}, "bad arguments"),
                    ({}, "bad arguments"),
                    ({"run_id": "run-ok", "verify": True}, "bad arguments"),
                ]:
                    r = await c.call_tool(tool, args)
                    text = text_of(r)
                    assert r.is_error and says in text and "\n" not in text, (tool, args, text)
            assert not (elsewhere / "report.html").exists()

    anyio.run(scenario)
    # the CLI agrees on the session and on the edited run
    session = out["session"]
    cli = subprocess.run(
        [ACCELOPT, "replay", session, "--root", str(root), "--verify"],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=120,
    )
    assert cli.returncode == 0 and "verified" in cli.stdout, cli.stdout + cli.stderr
    cli = subprocess.run(
        [ACCELOPT, "replay", "run-edited", "--root", str(root), "--verify"],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=120,
    )
    assert cli.returncode == 1 and "BeamSelected" in cli.stderr, cli.stdout + cli.stderr
