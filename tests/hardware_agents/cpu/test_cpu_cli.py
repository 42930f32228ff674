"""`accelopt calibrate`, `accelopt profile`, `accelopt suite list` through the real CLI entry."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import suites
from cli.main import main
from hardware_agents.cpu.calibrate import CalibrationRecord


@pytest.fixture
def cli_env(cpu_cache: Path, calibration: CalibrationRecord, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("ACCELOPT_CACHE_DIR", str(cpu_cache))
    monkeypatch.setenv("COLUMNS", "200")
    return cpu_cache


def test_suite_list(cli_env: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["suite", "list"]) == 0
    out = capsys.readouterr().out
    for name in suites.problem_names("cpu"):
        assert f"cpu/{name}" in out
    assert main(["suite", "list", "nope"]) == 1


def test_calibrate_prints_peaks(cli_env: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["calibrate", "--quick"]) == 0
    out = capsys.readouterr().out
    assert "GB/s" in out and "GFLOP/s" in out and "sgemm" in out


def test_profile_baseline_table(cli_env: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["profile", "cpu/rmsnorm_matmul"]) == 0
    out = capsys.readouterr().out
    for word in ("passed", "latency", "% of peak", "bound", "matmul", "large ok"):
        assert word in out


def test_profile_given_source_and_json(
    cli_env: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    src = tmp_path / "wrong.c"
    src.write_text(
        "void kernel(const float* lhs, const float* rhs, float* out) {\n"
        "    for (long i = 0; i < (long)B * M * N; i++) out[i] = lhs[i % (B * M * K)];\n}\n"
    )
    assert main(["profile", "cpu/bmm", "--solution", str(src), "--json"]) == 1
    prof = json.loads(capsys.readouterr().out)
    assert prof["status"] == "incorrect"
    assert main(["profile", "cpu/nope"]) == 2  # a wrong problem name, as `run` and `remeasure` exit


def test_profile_takes_the_agents_options_and_refuses_wrong_ones(
    cli_env: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`--option NAME=VALUE` is what `devices.cpu.options` takes in a run config, checked the
    same way: an unknown name, a value of the wrong type or no `=` exits 2 with one line on
    stderr and profiles nothing; a right one reaches the agent (`max_pct_peak=0.0001`: the
    baseline, at several % of the roofline, is then "faster than this machine allows")."""
    for bad, words in (
        ("max_rerun=1", ("--option max_rerun", "no option 'max_rerun'")),
        ("max_reruns=many", ("--option max_reruns",)),
        ("max_reruns", ("NAME=VALUE expected",)),
    ):
        assert main(["profile", "cpu_v2/silu", "--option", bad, "--json"]) == 2
        captured = capsys.readouterr()
        assert captured.out == "" and len(captured.err.strip().splitlines()) == 1, captured.err
        assert all(w in captured.err for w in words), captured.err
    assert main(["profile", "cpu_v2/silu", "--option", "max_pct_peak=0.0001", "--json"]) == 1
    prof = json.loads(capsys.readouterr().out)
    assert prof["status"] == "incorrect" and "roofline" in prof["log"], prof["log"]
