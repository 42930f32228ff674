"""Importing a FlashInfer-Bench trace set as a suite: one problem per definition (largest
workload timed, the smallest ones checked in the interpreter), the baseline chosen among
Triton/Python solutions (CUDA noted), safetensors inputs used when present and a clear
error naming the file otherwise; the imported problems profile in the interpreter, and
the CLI commands import and export."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from fib_fixture import BLOB, load_like_flashinfer, write_trace_set

from accelopt.cli import main
from accelopt.problem import SafetensorsInput
from suites.flashinfer import FlashInferImportError, TraceSet, load_suite_dir, problems_from


@pytest.fixture(scope="module")
def fib_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_trace_set(tmp_path_factory.mktemp("fib-src"))


def test_problems_pick_workloads_and_baselines(fib_dir):
    ts = TraceSet.load(fib_dir)
    problems = {p.name: p for p in problems_from(ts)}
    rms = problems["rmsnorm_h64"]
    assert rms.workload.axes == {"batch_size": 24}  # the largest workload is the problem's
    assert [w.axes["batch_size"] for w in rms.check_workloads] == [2, 5]  # the smallest are checked too
    blob = rms.check_workloads[1].inputs["hidden_states"]
    assert isinstance(blob, SafetensorsInput) and Path(blob.path).is_absolute() and Path(blob.path).is_file()
    assert rms.baseline.name == "rmsnorm_h64_triton_v1" and not rms.baseline.spec.destination_passing_style
    gemm = problems["gemm_n32_k48"]
    assert gemm.baseline.spec.language == "python" and gemm.workload.axes == {"M": 40}
    assert any("rmsnorm_h64_cuda_v2 (cuda)" in n for n in ts.notes)


def test_missing_blob_is_an_error_naming_the_file(tmp_path):
    src = write_trace_set(tmp_path / "src", with_blob=False)
    with pytest.raises(FlashInferImportError, match=r"w-r-5.*rmsnorm_h64_7f3a\.safetensors is missing"):
        problems_from(TraceSet.load(src))
    ts = TraceSet.load(src)
    rms = {p.name: p for p in problems_from(ts, skip_missing_blobs=True)}["rmsnorm_h64"]
    assert [w.uuid for w in [*rms.check_workloads, rms.workload]] == ["w-r-2", "w-r-9", "w-r-24"]
    assert any("w-r-5 skipped" in n for n in ts.notes)


def test_without_solutions_the_reference_is_the_baseline(tmp_path):
    src = write_trace_set(tmp_path / "src")
    for p in (src / "solutions").rglob("*.json"):
        p.unlink()
    problems = {p.name: p for p in problems_from(TraceSet.load(src))}
    base = problems["gemm_n32_k48"].baseline
    assert base.author == "reference" and base.spec.language == "python"
    assert not base.spec.destination_passing_style and "def run(A, B)" in base.sources[0].content


def test_cli_import_profile_and_export(fib_dir, tmp_path, interp_agent, capsys):
    out = tmp_path / "suite"
    assert main(["suite", "import-flashinfer", str(fib_dir), "--out", str(out), "--name", "fibtest"]) == 0
    printed = capsys.readouterr().out
    assert "rmsnorm_h64" in printed and "note:" in printed
    info = json.loads((out / "suite.json").read_text())
    assert info["name"] == "fibtest" and info["device"] == "h100"
    assert (out / "rmsnorm_h64" / "blob" / Path(BLOB).name).is_file()
    problems = {p.name: p for p in load_suite_dir(out)}
    rms = problems["rmsnorm_h64"]
    assert Path(rms.check_workloads[1].inputs["hidden_states"].path).is_file()  # resolved in the problem folder
    # the imported Triton solution (value-returning, kernel.py::run) and the Python one are correct
    prof = interp_agent.profile(rms, rms.baseline)
    assert prof.status == "unmeasured", prof.log
    assert len(prof.correctness) == 5 and all(c.passed for c in prof.correctness)
    gemm = problems["gemm_n32_k48"]
    prof = interp_agent.profile(gemm, gemm.baseline)
    assert prof.status == "unmeasured", prof.log
    # and back out through the other command
    assert main(["suite", "export-flashinfer", str(out), str(tmp_path / "fib")]) == 0
    loaded = load_like_flashinfer(tmp_path / "fib")
    assert set(loaded["definitions"]) == {"rmsnorm_h64", "gemm_n32_k48"}
    assert set(loaded["solutions"]) == {"rmsnorm_h64_triton_v1", "gemm_n32_k48_torch"}


def test_cli_import_reports_errors(tmp_path, capsys):
    src = write_trace_set(tmp_path / "src", with_blob=False)
    assert main(["suite", "import-flashinfer", str(src), "--out", str(tmp_path / "x")]) == 1
    assert "rmsnorm_h64_7f3a.safetensors" in capsys.readouterr().out
    assert main(["suite", "import-flashinfer", str(src), "--out", str(tmp_path / "x"), "--skip-missing-blobs"]) == 0


def test_cli_default_place_name_and_force(fib_dir, tmp_path, monkeypatch, capsys):
    import suites

    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    monkeypatch.delenv("ACCELOPT_SUITES_PATH", raising=False)
    assert main(["suite", "import-flashinfer", str(fib_dir)]) == 0
    assert "accelopt run --suite flashinfer --device h100" in capsys.readouterr().out
    assert "flashinfer" in suites.list_suites()
    assert {p.name for p in suites.load_suite("flashinfer")} == {"rmsnorm_h64", "gemm_n32_k48"}
    assert main(["suite", "import-flashinfer", str(fib_dir)]) == 1  # an earlier import is not overwritten
    assert "--force" in capsys.readouterr().out
    assert main(["suite", "import-flashinfer", str(fib_dir), "--force", "--definitions", "gemm_n32_k48"]) == 0
    assert [p.name for p in suites.load_suite("flashinfer")] == ["gemm_n32_k48"]
