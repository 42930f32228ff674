"""Helpers of the loop tests that drive the real CLI in a subprocess (imported as `loop_cli`;
tests/accelopt/loop/conftest.py puts this folder on sys.path)."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

ACCELOPT = [sys.executable, "-m", "cli.main"]


def cli(*args: str, root: Path, timeout: float = 600) -> subprocess.CompletedProcess:
    """`accelopt ARGS --root ROOT`, quiet logs, no memory URI from the environment."""
    env = {k: v for k, v in os.environ.items() if k != "ACCELOPT_MEMORY"}
    env["ACCELOPT_LOG_LEVEL"] = "ERROR"
    return subprocess.run(
        [*ACCELOPT, *args, "--root", str(root)], capture_output=True, text=True, timeout=timeout, env=env
    )


def run_dirs(root: Path) -> set[str]:
    return {p.name for p in root.iterdir() if (p / "log.aolog").exists()}


def kill_embedded_server(root: Path) -> None:
    """The root's embedded nats-server, which a killed CLI leaves behind."""
    info = root / ".nats" / "server.json"
    if info.exists():
        with contextlib.suppress(ProcessLookupError, ValueError, KeyError):
            os.kill(json.loads(info.read_text())["pid"], signal.SIGKILL)


def kill_session(sid: int) -> None:
    """SIGKILL every process of a session (a CLI started with `start_new_session=True` and every
    Ray process it started), as a crash of the whole machine's CLI side would. (Ray's workers
    run in their own process groups, so killpg is not enough.)"""
    from pathlib import Path as _Path

    for stat in _Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[3]) == sid:  # field 6 of stat: session id
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(stat.parent.name), signal.SIGKILL)
