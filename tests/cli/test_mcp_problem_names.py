"""A tool's problem names a registered suite's problem, never a folder: a suite reached by a
path (the agent's own folder, through `..`) would be a problem whose reference, trusted code
the judge runs unsandboxed, the agent wrote. The same check guards start_run's suite."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from cli.commands.mcp_server import problems
from cli.commands.mcp_server.problems import UnknownError

REPO = Path(__file__).resolve().parents[2]


def test_a_suite_folder_named_by_a_path_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    own = tmp_path / "agents_suite"
    shutil.copytree(REPO / "suites" / "cpu_v2", own)  # a real suite folder, where the agent may write
    monkeypatch.chdir(REPO)
    ref = f"suites/{os.path.relpath(own, REPO / 'suites')}/silu"
    assert not ref.startswith(("/", ".", "~"))
    for bad in (ref, "suites/cpu_v2/silu", "cpu_v2/../cpu_v2/silu", "cpu_v2/..", "_private/silu"):
        with pytest.raises(UnknownError) as e:
            problems.resolve(bad, None)
        assert "registered suite" in str(e.value) and "\n" not in str(e.value)
    assert problems.resolve("cpu_v2/silu", None)[0].name == "silu"
