"""An agent session's log (its kernels, every verdict) is of its user alone: the runs root it
goes under is made 0700, as `accelopt run` makes its own, so neither another user nor a
sandboxed kernel (another uid) can read another session's log."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest

from cli.commands.mcp_server import build


def test_the_sessions_root_is_private(tmp_path: Path) -> None:
    root = tmp_path / "shared" / "runs"
    (tmp_path / "shared").mkdir(mode=0o755)
    app = build(str(root), str(tmp_path / "memory"))
    try:
        assert app.session.path.is_file()
        assert (root.stat().st_mode & 0o777) == 0o700
        assert root.stat().st_uid == os.geteuid()
    finally:
        asyncio.run(app.judge.close())


def test_a_session_under_the_working_directory_is_private(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A --root of `.` is left as it is (the working directory): the session's own folder is 0700."""
    tmp_path.chmod(0o755)
    monkeypatch.chdir(tmp_path)
    app = build(".", str(tmp_path / "memory"))
    try:
        assert (app.session.path.parent.stat().st_mode & 0o777) == 0o700
    finally:
        asyncio.run(app.judge.close())
