"""The tools over what the root's logs say (replay_run, report_run), over `replays.py`."""

from __future__ import annotations

import asyncio
from pathlib import Path

from cli.commands.mcp_server import replays
from cli.commands.mcp_server.records import RecordedRef, ReplayResult, ReportResult
from cli.commands.mcp_server.tool import Ctx, ToolSpec


def record_tools(root: Path) -> tuple[ToolSpec, ...]:
    """A recorded run, agent session or campaign of `root`: re-derived, or rendered."""

    async def replay(ctx: Ctx, args: RecordedRef) -> tuple[ReplayResult, str]:
        r = await asyncio.to_thread(replays.verify, root, args.run_id)
        what = "scheduler" if r.kind == "campaign" else "coordinator"
        if r.verified:
            runs = ""
            if r.kind == "campaign":
                runs = (
                    f"; its runs: {r.runs_verified} verified, {r.runs_without_log} with no log (never begun)"
                )
            return r, (
                f"{r.kind} {r.run_id} verified: {r.decisions_checked} {what} decisions re-derived from "
                f"{r.inputs} recorded inputs ({r.events} events){runs}"
            )
        why = r.divergence or f"{len(r.runs_failed)} of its runs do not verify: {r.runs_failed[0]}"
        return r, f"{r.kind} {r.run_id} does not verify: {why}"

    async def report(ctx: Ctx, args: RecordedRef) -> tuple[ReportResult, str]:
        r = await asyncio.to_thread(replays.report, root, args.run_id)
        return r, f"report of {r.kind} {r.run_id} ({r.state}, {r.events} events) written to {r.path}"

    return (
        ToolSpec(
            "replay_run",
            "Replay a recorded run, agent session or campaign of this root as `accelopt replay ID "
            "--verify` does: every decision re-derived from the recorded inputs and compared with "
            "the recording (a campaign: its schedule, then each of its runs). A log that does not "
            "verify is a result (verified false, where they part), not an error.",
            RecordedRef,
            ReplayResult,
            replay,
        ),
        ToolSpec(
            "report_run",
            "Write the self-contained HTML report of a run, agent session or campaign of this root "
            "(as `accelopt report ID`) into its folder; returns its path on the server's host.",
            RecordedRef,
            ReportResult,
            report,
        ),
    )
