"""Strict input: a campaign file, a run config, a campaign id and a runs root are checked before
anything is created. Each mistake is refused with exit 2 and one line on stderr that names the
file and the key (a YAML error: the file and the line), and the filesystem is as it was: no
folder, no event store, no lock (the tree under the test's folder is compared before and after,
every file's and folder's modification time included). The root holds a real event store (a
nats-server ran on it) and a campaign's folder, so a command that started the root's server to
look for an id, or made a folder for one, would show."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cli.main import main
from events.runsource import open_log_endpoint

CID = "known-campaign"


def tree(base: Path) -> list[tuple[str, int]]:
    """Every path under `base` with its modification time (a folder's changes when an entry is
    made or removed in it)."""
    return sorted((str(p.relative_to(base)), p.lstat().st_mtime_ns) for p in [base, *base.rglob("*")])


@pytest.fixture
def place(tmp_path, monkeypatch):
    """A working folder (the cwd: a default `runs` would land here) with a runs root that has an
    event store on disk and a campaign's folder."""
    root = tmp_path / "runs"
    endpoint = open_log_endpoint(None, root)  # the root's embedded server makes its store, then stops
    endpoint.close()
    assert (root / ".nats" / "jetstream").is_dir()
    (root / "campaigns" / CID).mkdir(parents=True)
    monkeypatch.chdir(tmp_path)
    return tmp_path, root


def refused(capsys, base: Path, *argv: str) -> str:
    """Run `accelopt ARGV`: exit 2, nothing on stdout, one line on stderr (returned), and the
    tree under `base` unchanged."""
    before = tree(base)
    capsys.readouterr()
    code = main(list(argv))
    out = capsys.readouterr()
    lines = out.err.strip().splitlines()
    assert code == 2 and not out.out.strip() and len(lines) == 1, (code, out.out, out.err)
    assert tree(base) == before, "the command created or changed something"
    return lines[0]


def write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


SPEC = "name: t\nproblems:\n  - cpu_v2/silu@cpu\n"


def test_an_unknown_device_kind_under_devices_is_refused(place, capsys) -> None:
    base, root = place
    spec = write(base / "c.yaml", SPEC + "devices:\n  cpu: {profilers: 1}\n  trn9: {profilers: 1}\n")
    line = refused(capsys, base, "campaign", "run", str(spec), "--root", str(root))
    assert (
        f"{spec}: devices.trn9: unknown device kind 'trn9'" in line and "known: " in line and "trn1" in line
    )


def test_an_unknown_top_level_key_is_refused(place, capsys) -> None:
    base, root = place
    spec = write(base / "c.yaml", SPEC + "stopp: {max_runs: 3}\n")
    line = refused(capsys, base, "campaign", "run", str(spec), "--root", str(root))
    assert line.endswith(f"{spec}: stopp: unknown key")


@pytest.mark.parametrize(
    ("extra", "key"),
    [
        ("stop: {max_run: 3}\n", "stop.max_run"),
        ("devices:\n  cpu: {profilers: 1}\n  trn1: {profilerz: 1}\n", "devices.trn1.profilerz"),
        ("devices:\n  cpu: {set: [search.beam_widht=2]}\n", "devices.cpu: search.beam_widht"),
    ],
)
def test_a_nested_unknown_key_is_named_with_its_path(place, capsys, extra: str, key: str) -> None:
    base, root = place
    spec = write(base / "c.yaml", SPEC + extra)
    line = refused(capsys, base, "campaign", "run", str(spec), "--root", str(root))
    assert f"{spec}: {key}: unknown key" in line


def test_a_yaml_syntax_error_names_the_file_and_the_line(place, capsys) -> None:
    base, root = place
    spec = write(base / "c.yaml", SPEC + "devices:\n  cpu: {profilers: 1\n  trn1: {}\n")
    line = refused(capsys, base, "campaign", "run", str(spec), "--root", str(root))
    assert f"{spec}: line 6, column 7: YAML syntax error" in line and "<unicode string>" not in line


def test_a_run_config_is_as_strict(place, capsys) -> None:
    """A run config (`--config FILE`, `--set`) is checked the same way before a run starts:
    its device keys too."""
    base, root = place
    cfg = write(base / "run.yaml", "search:\n  beam_width: 2\n  iteratons: 1\n")
    line = refused(capsys, base, "run", "--problems", "silu", "--config", str(cfg), "--root", str(root))
    assert f"{cfg}: search.iteratons: unknown key" in line
    line = refused(
        capsys, base, "run", "--problems", "silu", "--set", "devices.trn9.workers=1", "--root", str(root)
    )
    assert "devices.trn9: unknown device kind 'trn9'" in line
    bad = write(base / "bad.yaml", "search: [1,\n")
    line = refused(capsys, base, "run", "--problems", "silu", "--config", str(bad), "--root", str(root))
    assert f"{bad}: line 2, column 1: YAML syntax error" in line


def test_resume_or_status_of_an_unknown_campaign_creates_nothing(place, capsys) -> None:
    base, root = place
    line = refused(capsys, base, "campaign", "resume", "no-such-campaign", "--root", str(root))
    assert f"campaign 'no-such-campaign': not under {root / 'campaigns'} (campaigns there: {CID})" in line
    line = refused(capsys, base, "campaign", "status", "no-such-campaign", "--root", str(root))
    assert "no-such-campaign" in line and CID in line
    line = refused(capsys, base, "campaign", "export", "no-such-campaign", "--out", "x", "--root", str(root))
    assert "no-such-campaign" in line
    line = refused(capsys, base, "resume", "no-such-run", "--root", str(root))
    assert "no-such-run" in line and "no log.aolog" in line


def test_a_wrong_root_creates_nothing(place, capsys) -> None:
    base, _ = place
    wrong = base / "runz"
    for argv in (
        ["campaign", "resume", CID, "--root", str(wrong)],
        ["campaign", "status", CID, "--root", str(wrong)],
        ["campaign", "status", "--root", str(wrong)],
    ):
        line = refused(capsys, base, *argv)
        assert str(wrong) in line and "no runs root" in line, line


def test_a_campaign_id_that_exists_is_not_started_again(place, capsys) -> None:
    base, root = place
    spec = write(base / "c.yaml", SPEC)
    line = refused(capsys, base, "campaign", "run", str(spec), "--id", CID, "--root", str(root))
    assert line.endswith(f"to go on with it, accelopt campaign resume {CID} --root {root}")


def test_the_campaign_file_is_json_too(place, capsys) -> None:
    """JSON is YAML: the same checks, the same line (a JSON file's syntax error has a line)."""
    base, root = place
    spec = write(base / "c.json", json.dumps({"problems": ["cpu_v2/silu@cpu"], "budgett": {}}))
    assert refused(capsys, base, "campaign", "run", str(spec), "--root", str(root)).endswith(
        "budgett: unknown key"
    )
