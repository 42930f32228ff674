"""Fleet tests: worker processes started with `accelopt worker`, NATS clusters on loopback."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest


def start_worker(url: str, name: str, *extra: str, log: Path) -> subprocess.Popen:
    env = {**os.environ, "ACCELOPT_LOG_LEVEL": "ERROR"}
    out = open(log, "w")  # noqa: SIM115 - owned by the child
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "cli.main",
            "worker",
            "--nats",
            url,
            "--device",
            "cpu",
            "--name",
            name,
            "--ack-wait",
            "4",
            "--heartbeat",
            "1",
            *extra,
        ],
        stdout=out,
        stderr=subprocess.STDOUT,
        env=env,
        start_new_session=True,
    )


def wait_ready(proc: subprocess.Popen, log: Path, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if "worker ready" in log.read_text():
            return
        if proc.poll() is not None:
            raise AssertionError(f"worker exited: {log.read_text()}")
        time.sleep(0.2)
    raise AssertionError(f"worker not ready: {log.read_text()}")


@pytest.fixture
def workers():
    procs: list[subprocess.Popen] = []

    def spawn(url: str, name: str, log: Path, *extra: str) -> subprocess.Popen:
        p = start_worker(url, name, *extra, log=log)
        procs.append(p)
        wait_ready(p, log)
        return p

    yield spawn
    for p in procs:
        if p.poll() is None:
            p.kill()
            p.wait(10)
