"""`accelopt replay`, `resume` and `ablate` on a run that does not exist: exit 2 and name it
(they share `load_run_events`, cli/run_log.py), on stderr."""

from __future__ import annotations

import pytest

from cli.main import main


@pytest.mark.parametrize("command", ["replay", "resume", "ablate"])
def test_an_unknown_run_is_named_and_exits_2(command, tmp_path, capsys):
    assert main([command, "no-such-run", "--root", str(tmp_path / "empty-root")]) == 2
    out = capsys.readouterr()
    assert "no-such-run" in out.err and "no log.aolog" in out.err and not out.out
