"""The device queue on the dashboard's runs page (`device_queues` of /api/runs): the line of
each live MCP server's queue record under the root (replay/device_queues.py), read again when
a record changes, a dead server's record skipped. The records are written as `accelopt mcp`
writes them (`accelopt.device_queue.QueueRecord`); the server's queue itself is tested
through `accelopt mcp` in tests/cli/test_mcp_device_queue.py."""

from __future__ import annotations

import json
import os
import subprocess
import time
import urllib.request
from pathlib import Path

import msgspec

from accelopt.device_queue import DeviceQueue, Limits, QueueRecord, queue_record_path
from replay.dashboard.browser import ServerThread


def write(root: Path, server: str, pid: int, q: DeviceQueue) -> None:
    path = queue_record_path(root, server)
    path.parent.mkdir(parents=True, exist_ok=True)
    record = QueueRecord(
        server=server,
        pid=pid,
        updated_at=time.time(),
        backends={"cpu": "this server's judge"},
        state=q.snapshot(),
    )
    path.write_bytes(msgspec.json.encode(record))


def queues(url: str) -> list[str]:
    with urllib.request.urlopen(url + "/api/runs", timeout=20) as r:
        return json.loads(r.read())["device_queues"]


def test_the_runs_page_has_a_line_per_live_queue(tmp_path: Path) -> None:
    root = tmp_path / "runs"
    root.mkdir()
    q = DeviceQueue(Limits(device_s=600.0))
    q.submit("a1", "claude-code 2.1 #abc123", "cpu")
    q.submit("b1", "codex 0.9 #def456", "cpu")
    write(root, "20261206-190000-aaaa", os.getpid(), q)
    dead = subprocess.Popen(["true"])
    dead.wait()
    write(root, "20261206-180000-dead", dead.pid, DeviceQueue())  # its server is gone: not shown
    with ServerThread(root) as server:
        (line,) = queues(server.url)
        assert line == (
            "device queue of mcp 20261206-190000-aaaa: cpu: running claude-code 2.1 #abc123, 1 waiting "
            "(this server's judge) · sessions: claude-code 2.1 #abc123 0.0 of 600 s (1 running); "
            "codex 0.9 #def456 0.0 of 600 s (1 waiting)"
        )
        q.finish("a1", 42.0)  # the record changes: the page's model is built again
        write(root, "20261206-190000-aaaa", os.getpid(), q)
        (line,) = queues(server.url)
        assert "cpu: running codex 0.9 #def456, 0 waiting" in line and "#abc123 42.0 of 600 s;" in line
