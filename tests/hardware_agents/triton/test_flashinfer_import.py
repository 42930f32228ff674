"""Importing a trace set FlashInfer-Bench wrote (its own classes and writers) as a suite: one
problem per definition (largest workload timed, the smallest no larger than it checked in the
interpreter), the baseline chosen among Triton/Python solutions (CUDA noted) with its calling
convention recognised from its entry's signature, safetensors inputs used when present and a
clear error naming the file otherwise; the imported problems profile in the interpreter
(`accelopt profile /path/to/suite/problem`), are listed by path and found by their --name,
and the CLI commands import and export."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from fib_helpers import load_with_flashinfer, write_fib_set

import suites
from accelopt.problem import SafetensorsInput
from cli.main import main
from suites.flashinfer import FlashInferImportError, TraceSet, load_suite_dir, problems_from

BLOB = "blob/workloads/rmsnorm/rmsnorm_h64/rmsnorm_h64_w-r-5.safetensors"


@pytest.fixture(scope="module")
def fib_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_fib_set(tmp_path_factory.mktemp("fib-src"))


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


def test_the_target_kind_must_run_triton_and_sizes_the_checks(fib_dir):
    """The suite's device kind is asked of its family: the interpreter's bound
    (`Capabilities.interpretable_elements`) sizes the check workloads, and a kind that does not
    run Triton kernels is refused, naming those that do."""
    from hardware_agents.families import get_family
    from suites.flashinfer.convert import interpretable_elements

    assert (
        interpretable_elements("h200") == get_family("triton").capabilities.interpretable_elements == 1 << 22
    )
    ts = TraceSet.load(fib_dir)
    with pytest.raises(
        FlashInferImportError, match="'trn1' does not run Triton kernels; kinds that do: b200, h100"
    ):
        problems_from(ts, device="trn1")
    with pytest.raises(FlashInferImportError, match="unknown device kind 'nosuch'"):
        problems_from(ts, device="nosuch")
    assert problems_from(ts, device="b200") == problems_from(ts)  # every GPU kind: the same bound


def test_smallest_workload_is_what_the_interpreter_checks(tmp_path, interp_agent):
    """A 64-row and a 520,128-row workload: `--workload smallest` checks at 64 rows only."""
    src = write_fib_set(tmp_path / "src", rows=(520_128, 64, 8))
    rms = {p.name: p for p in problems_from(TraceSet.load(src), workload="smallest")}["rmsnorm_h64"]
    assert rms.workload.axes == {"batch_size": 8} and rms.check_workloads == []
    largest = {p.name: p for p in problems_from(TraceSet.load(src))}["rmsnorm_h64"]
    assert largest.workload.axes == {"batch_size": 520_128}
    assert [w.axes["batch_size"] for w in largest.check_workloads] == [64, 8]  # file order
    prof = interp_agent.profile(rms, rms.baseline, seeds=(0,))
    assert prof.status == "unmeasured", prof.log
    assert "batch_size=8" in prof.log and "520128" not in prof.log


def test_missing_blob_is_an_error_naming_the_file(tmp_path):
    src = write_fib_set(tmp_path / "src", with_blob=False)
    with pytest.raises(FlashInferImportError, match=r"w-r-5.*rmsnorm_h64_w-r-5\.safetensors is missing"):
        problems_from(TraceSet.load(src))
    ts = TraceSet.load(src)
    rms = {p.name: p for p in problems_from(ts, skip_missing_blobs=True)}["rmsnorm_h64"]
    assert [w.uuid for w in [*rms.check_workloads, rms.workload]] == ["w-r-2", "w-r-9", "w-r-24"]
    assert any("w-r-5 skipped" in n for n in ts.notes)


def test_without_solutions_the_reference_is_the_baseline(tmp_path):
    src = write_fib_set(tmp_path / "src")
    for p in (src / "solutions").rglob("*.json"):
        p.unlink()
    problems = {p.name: p for p in problems_from(TraceSet.load(src))}
    base = problems["gemm_n32_k48"].baseline
    assert base.author == "reference" and base.spec.language == "python"
    assert not base.spec.destination_passing_style and "def run(A, B)" in base.sources[0].content


def test_cli_import_profile_list_and_export(fib_dir, tmp_path, capsys):
    out = tmp_path / "suite"
    assert main(["suite", "import-flashinfer", str(fib_dir), "--out", str(out), "--name", "fibtest"]) == 0
    printed = capsys.readouterr().out
    assert "rmsnorm_h64" in printed and "note:" in printed and "value-returning" in printed
    info = json.loads((out / "suite.json").read_text())
    assert info["name"] == "fibtest" and info["device"] == "h100"
    assert (out / "rmsnorm_h64" / "blob" / Path(BLOB).name).is_file()
    saved = json.loads((out / "rmsnorm_h64" / "solution.json").read_text())
    assert saved["spec"]["destination_passing_style"] is False  # the recognised convention is saved
    problems = {p.name: p for p in load_suite_dir(out)}
    rms = problems["rmsnorm_h64"]
    assert Path(
        rms.check_workloads[1].inputs["hidden_states"].path
    ).is_file()  # resolved in the problem folder
    # `accelopt profile /path/to/suite/problem`: the GPU-minded Triton baseline runs its Triton path
    assert (
        main(["profile", f"{out}/rmsnorm_h64", "--seeds", "0", "--json"]) == 3
    )  # unmeasured: correct, not timed (neither "passed", 0, nor a failure, 1)
    prof = json.loads(capsys.readouterr().out)
    assert prof["status"] == "unmeasured", prof["log"]
    own = [c for c in prof["correctness"] if not c["case"].startswith("boundary-")]  # and boundaries.py's
    assert len(own) == 3 and all(c["passed"] for c in prof["correctness"])
    assert main(["profile", f"{out}/gemm_n32_k48", "--seeds", "0", "--json"]) == 3
    assert json.loads(capsys.readouterr().out)["status"] == "unmeasured"
    assert main(["suite", "list", str(out)]) == 0
    listed = capsys.readouterr().out  # a suite given by its path: its problems with their shapes
    assert "output[24, 64]" in listed and "C[40, 32]" in listed
    # and back out through the other command
    assert main(["suite", "export-flashinfer", str(out), str(tmp_path / "fib")]) == 0
    loaded = load_with_flashinfer(tmp_path / "fib")
    assert set(loaded.definitions) == {"rmsnorm_h64", "gemm_n32_k48"}
    assert {s.name for ss in loaded.solutions.values() for s in ss} == {
        "rmsnorm_h64_triton_v1",
        "rmsnorm_h64_cuda_v2",  # the folder's other solution, kept with the traces that evaluate it
        "gemm_n32_k48_torch",
    }
    assert loaded.get_solution("rmsnorm_h64_triton_v1").spec.destination_passing_style is False
    statuses = [t.evaluation.status.value for t in loaded.traces["rmsnorm_h64"]]
    assert statuses == ["PASSED", "INCORRECT_NUMERICAL", "RUNTIME_ERROR"]  # the recorded traces, NaN/inf too


def test_cli_import_reports_errors(tmp_path, capsys):
    src = write_fib_set(tmp_path / "src", with_blob=False)
    assert main(["suite", "import-flashinfer", str(src), "--out", str(tmp_path / "x")]) == 1
    assert "rmsnorm_h64_w-r-5.safetensors" in capsys.readouterr().err
    assert (
        main(["suite", "import-flashinfer", str(src), "--out", str(tmp_path / "x"), "--skip-missing-blobs"])
        == 0
    )
    assert main(["suite", "list", str(tmp_path / "nowhere")]) == 1
    assert "not a suite folder" in capsys.readouterr().err


def test_cli_default_place_name_and_force(fib_dir, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    monkeypatch.delenv("ACCELOPT_SUITES_PATH", raising=False)
    assert main(["suite", "import-flashinfer", str(fib_dir)]) == 0
    assert "accelopt run --suite flashinfer --device h100" in capsys.readouterr().out
    assert "flashinfer" in suites.list_suites()
    assert {p.name for p in suites.load_suite("flashinfer")} == {"rmsnorm_h64", "gemm_n32_k48"}
    assert main(["suite", "import-flashinfer", str(fib_dir)]) == 1  # an earlier import is not overwritten
    assert "--force" in capsys.readouterr().err
    assert main(["suite", "import-flashinfer", str(fib_dir), "--force", "--definitions", "gemm_n32_k48"]) == 0
    assert [p.name for p in suites.load_suite("flashinfer")] == ["gemm_n32_k48"]
    # an --out folder in the suite dir under another --name is found (and listed) by that name
    out = suites.user_suites_dir() / "folder-name"
    assert main(["suite", "import-flashinfer", str(fib_dir), "--out", str(out), "--name", "fib-by-name"]) == 0
    assert "accelopt run --suite fib-by-name" in capsys.readouterr().out
    assert "fib-by-name" in suites.list_suites()
    assert {p.name for p in suites.load_suite("fib-by-name")} == {"rmsnorm_h64", "gemm_n32_k48"}
    assert suites.get_problem("fib-by-name/gemm_n32_k48").name == "gemm_n32_k48"
    assert main(["suite", "list", "fib-by-name"]) == 0
    listed = capsys.readouterr().out
    assert "suite fib-by-name:" in listed and "C[40, 32]" in listed
