"""start_run, watch_run and stop_run: `accelopt run` processes this server starts under its
root and memory (each run its own log, as any run), their state as `accelopt runs` says it,
and a SIGTERM to stop one (only a run this server started)."""

from __future__ import annotations

import asyncio
import os
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from cli.commands.mcp_server import processes
from cli.commands.mcp_server.records import RunStatus, StartRunArgs


class RunError(RuntimeError):
    """A run tool cannot do what was asked; one line."""


@dataclass
class _Started:
    proc: subprocess.Popen[bytes]
    output: Path
    budget_usd: float


class Runs:
    def __init__(self, root: str | Path, memory_uri: str, output_dir: Path) -> None:
        self.root = Path(root)
        self.memory_uri = memory_uri
        self.output_dir = output_dir
        self._started: dict[str, _Started] = {}

    def _command(self, a: StartRunArgs) -> list[str]:
        cmd = ["run", "--suite", a.suite, "--problems", ",".join(a.problems)]
        cmd += ["--preset", a.preset, "--budget", repr(a.budget_usd), "--model", a.model]
        cmd += ["--root", str(self.root), "--memory", self.memory_uri]
        if a.iterations is not None:
            cmd += ["--set", f"search.iterations={a.iterations}"]
        if a.device is not None:
            cmd += ["--device", a.device]
        return cmd

    async def start(self, a: StartRunArgs) -> RunStatus:
        output = self.output_dir / f"run-{time.strftime('%H%M%S')}-{os.getpid()}-{len(self._started)}.out"
        proc = processes.spawn(self._command(a), output)
        try:
            run_id = await processes.wait_for_lock(
                proc, output, lambda: sorted(self.root.glob("*/run.lock")), "accelopt run"
            )
        except processes.StartError as e:
            raise RunError(str(e)) from None
        self._started[run_id] = _Started(proc, output, a.budget_usd)
        return await asyncio.to_thread(self.status, run_id)

    def status(self, run_id: str) -> RunStatus:
        """Blocking (it may read the root's event stream)."""
        from replay.runs import list_runs

        listing = next((r for r in list_runs(self.root)[0] if r.summary.run_id == run_id), None)
        started = self._started.get(run_id)
        if listing is None:
            if started is None:
                raise RunError(f"no run {run_id!r} under {self.root}")
            code = started.proc.poll()
            if code is None:
                return RunStatus(run_id=run_id, state="starting", pid=started.proc.pid)
            # ended before its log began: stopped (SIGTERM) or failed, never "starting" again
            return RunStatus(
                run_id=run_id,
                state=processes.stopped_state(code),
                label=f"ended before its log began (exit {code})",
                budget_usd=started.budget_usd,
                output_tail=processes.tail(started.output),
            )
        s, state = listing.summary, listing.state()
        return RunStatus(
            run_id=run_id,
            state=state.name,
            label=state.label,
            problems=s.problems,
            iterations_done=s.iterations_done,
            iterations_planned=s.iterations_planned,
            kernels=s.kernels,
            speedup_geomean=s.speedup_geomean,
            pct_peak_geomean=s.pct_peak_geomean,
            cost_usd=s.cost_usd,
            budget_usd=started.budget_usd if started else None,
            pid=started.proc.pid if started and started.proc.poll() is None else None,
            output_tail=processes.tail(started.output) if started else "",
        )

    async def stop(self, run_id: str) -> RunStatus:
        started = self._started.get(run_id)
        if started is None:
            raise RunError(f"run {run_id!r} was not started by this server: stop it where it runs")
        await processes.stop(started.proc)
        return await asyncio.to_thread(self.status, run_id)

    def close(self) -> None:
        """Runs outlive the session that started them (their own locks say how they end)."""
