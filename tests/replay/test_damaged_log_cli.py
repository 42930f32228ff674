"""`accelopt replay [--verify]`, `report` and `resume` on a damaged exported log: an error that
names the byte offset (exit 2, no traceback), and with `--valid-prefix` the events before the
damage, with a warning. Before the hash chain one changed byte in a kernel's source still
"verified", and 64 garbage bytes gave a UnicodeDecodeError traceback."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from accelopt import catalog as ev
from cli.main import main
from events.logfile import LogReader, read_events

RUN = "damaged"


@pytest.fixture(scope="module")
def events(synthetic) -> list[ev.Event]:
    return synthetic(run_id=RUN, problems=2, seed=3, overrides=("search.iterations=2",))


@pytest.fixture
def root(tmp_path: Path, events, export_log) -> Path:
    export_log(events, tmp_path / RUN / "log.aolog")
    return tmp_path


def _flip_in_a_kernel_source(path: Path, events: list[ev.Event]) -> int:
    """Change one byte inside the source of the last kernel proposed (a byte the decoder still
    accepts)."""
    src = [e.source for e in events if isinstance(e, ev.KernelProposed) and len(e.source) > 40][-1]
    data = bytearray(path.read_bytes())
    at = bytes(data).rindex(src.encode()) + 20
    data[at] = ord("X") if data[at] != ord("X") else ord("Y")
    path.write_bytes(bytes(data))
    return at


def test_one_changed_byte_of_a_kernel_source_fails_verify(root: Path, events, capsys) -> None:
    path = root / RUN / "log.aolog"
    assert main(["replay", RUN, "--verify", "--root", str(root)]) == 0
    capsys.readouterr()
    at = _flip_in_a_kernel_source(path, events)
    assert main(["replay", RUN, "--verify", "--root", str(root)]) == 2
    out = capsys.readouterr().err
    m = re.search(r"damaged at byte (\d+) \(record (\d+)\)", out)
    assert m and int(m.group(1)) <= at and "--valid-prefix" in out, out
    assert main(["replay", RUN, "--verify", "--valid-prefix", "--root", str(root)]) == 0
    out = capsys.readouterr().out
    assert "warning" in out and "valid prefix" in out and "verified" in out


def test_garbage_bytes_in_the_middle_every_tool(root: Path, events, capsys) -> None:
    path = root / RUN / "log.aolog"
    raw = path.read_bytes()
    mid = len(raw) // 2
    path.write_bytes(raw[:mid] + bytes(range(256))[:64] + raw[mid + 64 :])
    for args in (
        ["replay", RUN],
        ["replay", RUN, "--verify"],
        ["report", RUN, "--out", str(root / "r.html")],
        ["resume", RUN],
    ):
        assert main([*args, "--root", str(root)]) == 2, args
        out = capsys.readouterr().err
        assert "damaged at byte" in out and "Traceback" not in out, (args, out)
    reader = LogReader(path, valid_prefix=True)
    kept = sum(1 for _ in reader.records())
    assert 0 < kept < len(events)
    for args in (
        ["replay", RUN, "--valid-prefix"],
        ["report", RUN, "--valid-prefix", "--out", str(root / "r.html")],
    ):
        assert main([*args, "--root", str(root)]) == 0, args
        out = capsys.readouterr().out
        assert f"using the {kept} records before it" in out, (args, out)
    assert (root / "r.html").stat().st_size > 1000


@pytest.mark.parametrize("content", [b"", b"not a log at all", b"ACCELOPT-LOG 2\n"])
def test_empty_truncated_or_garbage_files_exit_2_cleanly(root: Path, content: bytes, capsys) -> None:
    (root / RUN / "log.aolog").write_bytes(content)
    for args in (
        ["replay", RUN],
        ["replay", RUN, "--verify"],
        ["report", RUN, "--out", str(root / "r.html")],
    ):
        assert main([*args, "--root", str(root)]) == 2, args
        out = capsys.readouterr().err
        assert "log.aolog" in out and "Traceback" not in out, (args, out)


def test_a_truncated_export_keeps_its_valid_prefix(root: Path, events, capsys) -> None:
    path = root / RUN / "log.aolog"
    raw = path.read_bytes()
    path.write_bytes(raw[: len(raw) * 2 // 3])
    assert main(["replay", RUN, "--root", str(root)]) == 2
    assert "truncated record" in capsys.readouterr().err
    got = read_events(path, valid_prefix=True)
    assert got == events[: len(got)] and len(got) > len(events) // 2
