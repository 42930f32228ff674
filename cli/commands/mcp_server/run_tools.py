"""The run tools (start_run, watch_run, stop_run) over `runs.py`."""

from __future__ import annotations

import asyncio

from cli.commands.mcp_server import problems
from cli.commands.mcp_server.records import RunRef, RunStatus, StartRunArgs
from cli.commands.mcp_server.runs import Runs
from cli.commands.mcp_server.tool import Ctx, ToolSpec


def run_tools(runs: Runs) -> tuple[ToolSpec, ...]:
    """AccelOpt's own search, as runs of the server's root."""

    async def start(ctx: Ctx, args: StartRunArgs) -> tuple[RunStatus, str]:
        for name in args.problems:
            await asyncio.to_thread(problems.resolve, f"{args.suite}/{name}", args.device)
        status = await runs.start(args)
        return status, f"run {status.run_id} started ({status.state}), budget ${args.budget_usd:g}"

    async def watch(ctx: Ctx, args: RunRef) -> tuple[RunStatus, str]:
        s = await asyncio.to_thread(runs.status, args.run_id)
        speed = f", speedup {s.speedup_geomean:.2f}x" if s.speedup_geomean else ""
        it = f"{s.iterations_done}/{s.iterations_planned}" if s.iterations_planned else str(s.iterations_done)
        return s, f"run {s.run_id}: {s.label or s.state}, iterations {it}, {s.kernels} kernels{speed}"

    async def stop(ctx: Ctx, args: RunRef) -> tuple[RunStatus, str]:
        s = await runs.stop(args.run_id)
        return s, f"run {s.run_id}: {s.label or s.state}"

    return (
        ToolSpec(
            "start_run",
            "Start an `accelopt run` (AccelOpt's own search: planner, executor, fixer, summarizer "
            "over a beam) on problems of a suite, under this server's runs root and memory, with a "
            "hard LLM budget in USD (the offline builtin/tuner model costs nothing). Returns once the "
            "run has its id; watch_run follows it.",
            StartRunArgs,
            RunStatus,
            start,
        ),
        ToolSpec(
            "watch_run",
            "A run's state and figures as `accelopt runs` gives them (state, iterations, kernels, "
            "speedup, % of peak, cost against its budget), any run of this root.",
            RunRef,
            RunStatus,
            watch,
        ),
        ToolSpec(
            "stop_run",
            "Stop a run this server started (SIGTERM, as Ctrl-C: the run unwinds; the result says "
            "the state it was left in, as `accelopt runs` says it).",
            RunRef,
            RunStatus,
            stop,
        ),
    )
