"""start_run, watch_run and stop_run: `accelopt run` processes this server starts under its
root and memory (each run its own log, as any run), their state as `accelopt runs` says it,
and a SIGTERM to stop one (only a run this server started)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from cli.commands.mcp_server.records import RunStatus, StartRunArgs

START_LIMIT_S = 300.0  # Ray, the agents, the embedded event server: a loaded host is slow


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
        cmd = [
            sys.executable,
            "-m",
            "cli.main",
            "run",
            "--suite",
            a.suite,
            "--problems",
            ",".join(a.problems),
        ]
        cmd += ["--preset", a.preset, "--budget", repr(a.budget_usd), "--model", a.model]
        cmd += ["--root", str(self.root), "--memory", self.memory_uri]
        if a.iterations is not None:
            cmd += ["--set", f"search.iterations={a.iterations}"]
        if a.device is not None:
            cmd += ["--device", a.device]
        return cmd

    async def start(self, a: StartRunArgs) -> RunStatus:
        from replay.runstate import read_lock

        self.output_dir.mkdir(parents=True, exist_ok=True)
        output = self.output_dir / f"run-{time.strftime('%H%M%S')}-{os.getpid()}-{len(self._started)}.out"
        with open(output, "wb") as fh:
            proc = subprocess.Popen(
                self._command(a),
                stdin=subprocess.DEVNULL,
                stdout=fh,
                stderr=subprocess.STDOUT,
                cwd=Path(__file__).resolve().parents[3],
                start_new_session=True,
            )
        deadline = time.monotonic() + START_LIMIT_S
        while time.monotonic() < deadline:
            for lock in self.root.glob("*/run.lock"):
                if read_lock(lock).pid == proc.pid:
                    run_id = lock.parent.name
                    self._started[run_id] = _Started(proc, output, a.budget_usd)
                    return await asyncio.to_thread(self.status, run_id)
            if proc.poll() is not None:
                raise RunError(f"accelopt run exited ({proc.returncode}): {_last_line(output)}")
            await asyncio.sleep(0.5)
        proc.terminate()
        raise RunError(f"the run did not start within {START_LIMIT_S:.0f} s: {_last_line(output)}")

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
                state="stopped" if code in (143, -signal.SIGTERM) else "failed",
                label=f"ended before its log began (exit {code})",
                budget_usd=started.budget_usd,
                output_tail=_tail(started.output),
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
            output_tail=_tail(started.output) if started else "",
        )

    async def stop(self, run_id: str) -> RunStatus:
        started = self._started.get(run_id)
        if started is None:
            raise RunError(f"run {run_id!r} was not started by this server: stop it where it runs")
        if started.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(started.proc.pid, signal.SIGTERM)  # it unwinds: its lock says stopped
            for _ in range(600):
                if started.proc.poll() is not None:
                    break
                await asyncio.sleep(0.1)
            else:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(started.proc.pid, signal.SIGKILL)
                await asyncio.to_thread(started.proc.wait)
        return await asyncio.to_thread(self.status, run_id)

    def close(self) -> None:
        """Runs outlive the session that started them (their own locks say how they end)."""


def _tail(path: Path, n: int = 8) -> str:
    try:
        lines = path.read_bytes()[-8192:].decode(errors="replace").splitlines()
    except OSError:
        return ""
    return "\n".join(ln for ln in lines[-n:] if ln.strip())


def _last_line(path: Path) -> str:
    tail = _tail(path, 20).splitlines()
    return tail[-1].strip() if tail else "(no output)"
