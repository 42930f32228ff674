"""A FlashInfer-Bench folder as people publish it imports in one command, and every file it
leaves out is named with the reason:

- workloads and traces saved one per file as pretty-printed `.json` (FlashInfer-Bench's
  `save_json_file`), which FlashInfer-Bench's own loader does not read;
- two solution files of one name (a `deprecated_` copy beside the current file), on which
  FlashInfer-Bench's loader stops: the current one is kept, `--solution-file` chooses;
- a file that is not JSON, a workload of a definition the folder lacks: skipped, named;
- a reference that returns a dict keyed by output name (as FlashInfer-Bench accepts), and a
  value-returning kernel that does the same;
- `accelopt profile --solution FILE.json` with the file's convention left implicit: detected as
  the import detects it, `--convention` over it; exit codes keep correct apart from failed;
- the folder's recorded traces travel with the suite and come back in its export, which the
  real FlashInfer-Bench loads."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import flashinfer_bench as fib
import pytest
from fib_helpers import load_with_flashinfer, read_tree
from flashinfer_bench.data import save_json_file

from cli.main import main
from suites.flashinfer import TraceSet

NAME = "rms_and_norm_h64"
REFERENCE = """import torch


@torch.no_grad()
def run(hidden_states, weight):
    x = hidden_states.to(torch.float32)
    inv_rms = torch.rsqrt(x.pow(2).mean(dim=-1) + 1e-6)
    y = x * inv_rms[:, None] * weight.to(torch.float32)
    return {"output": y.to(hidden_states.dtype), "inv_rms": inv_rms}
"""
KERNEL = """import torch
import triton
import triton.language as tl


@triton.jit
def _k(x_ptr, w_ptr, o_ptr, r_ptr, H: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, H)
    x = tl.load(x_ptr + row * H + offs).to(tl.float32)
    w = tl.load(w_ptr + offs).to(tl.float32)
    r = tl.rsqrt(tl.sum(x * x, axis=0) / H + 1e-6)
    tl.store(o_ptr + row * H + offs, (x * r * w).to(tl.bfloat16))
    tl.store(r_ptr + row, r)


def run(hidden_states, weight):
    n = hidden_states.shape[0]
    out = torch.empty_like(hidden_states)
    rms = torch.empty(n, dtype=torch.float32, device=hidden_states.device)
    _k[(n,)](hidden_states, weight, out, rms, H=hidden_states.shape[1])
    return RESULT
"""
CURRENT = KERNEL.replace("RESULT", "out, rms")
AS_DICT = KERNEL.replace("RESULT", '{"inv_rms": rms, "output": out}')
OLD = KERNEL.replace("RESULT", "out, rms * 2")  # the superseded copy: wrong
SOLUTION = "someone_triton_v1"
ENV = fib.Environment(hardware="NVIDIA H100 80GB HBM3", libs={"torch": "2.9.1", "triton": "3.5.1"})


def _solution(content: str) -> fib.Solution:
    return fib.Solution(
        name=SOLUTION,
        definition=NAME,
        author="someone",
        spec=fib.BuildSpec(language="triton", target_hardware=["B200"], entry_point="main.py::run"),
        sources=[fib.SourceFile(path="main.py", content=content)],
    )


def write_as_published(root: Path) -> Path:
    d = fib.Definition(
        name=NAME,
        op_type="rmsnorm",
        axes={"batch_size": fib.AxisVar(), "hidden_size": fib.AxisConst(value=64)},
        inputs={
            "hidden_states": fib.TensorSpec(shape=["batch_size", "hidden_size"], dtype="bfloat16"),
            "weight": fib.TensorSpec(shape=["hidden_size"], dtype="bfloat16"),
        },
        outputs={
            "output": fib.TensorSpec(shape=["batch_size", "hidden_size"], dtype="bfloat16"),
            "inv_rms": fib.TensorSpec(shape=["batch_size"], dtype="float32"),
        },
        reference=REFERENCE,
    )
    save_json_file(d, root / "definitions" / "rmsnorm" / f"{NAME}.json")
    (root / "definitions" / "rmsnorm" / "broken.json").write_text('{"name": "broken",')
    sols = root / "solutions" / "rmsnorm" / NAME
    save_json_file(_solution(OLD), sols / f"deprecated_{SOLUTION}.json")
    save_json_file(_solution(CURRENT), sols / f"{SOLUTION}.json")
    w = fib.Workload(
        uuid="5a1b2c3d",
        axes={"batch_size": 48},
        inputs={"hidden_states": fib.RandomInput(), "weight": fib.RandomInput()},
    )
    save_json_file(
        fib.Trace(definition=NAME, workload=w), root / "workloads" / "rmsnorm" / f"{NAME}_5a1b2c3.json"
    )
    stray = fib.Workload(uuid="s", axes={"M": 3}, inputs={})
    save_json_file(
        fib.Trace(definition="gemm_gone", workload=stray), root / "workloads" / "gemm" / "gemm_gone_s.json"
    )
    evaluation = fib.Evaluation(
        status="PASSED",
        environment=ENV,
        timestamp="2025-12-21T23:19:22",
        correctness=fib.Correctness(max_relative_error=0.0078, max_absolute_error=0.031),
        performance=fib.Performance(latency_ms=0.01, reference_latency_ms=0.05, speedup_factor=5.0),
    )
    trace = fib.Trace(definition=NAME, workload=w, solution=SOLUTION, evaluation=evaluation)
    save_json_file(trace, root / "traces" / "rmsnorm" / f"{SOLUTION}_{NAME}_5a1b2c3.json")
    return root


@pytest.fixture(scope="module")
def published(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_as_published(tmp_path_factory.mktemp("as-published"))


@pytest.fixture(scope="module")
def suite(published: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("suite") / "s"
    assert main(["suite", "import-flashinfer", str(published), "--out", str(out)]) == 0
    return out


def test_flashinfer_itself_stops_at_the_first_defect(published, tmp_path):
    with pytest.raises(ValueError, match="Invalid JSON"):
        load_with_flashinfer(published)
    shutil.copytree(published, tmp_path / "f")
    (tmp_path / "f" / "definitions" / "rmsnorm" / "broken.json").unlink()
    with pytest.raises(ValueError, match="Duplicate solution name"):
        load_with_flashinfer(tmp_path / "f")


def test_one_command_imports_it_and_names_every_file_left_out(published, tmp_path, capsys):
    out = tmp_path / "s"
    assert main(["suite", "import-flashinfer", str(published), "--out", str(out)]) == 0
    text = " ".join(capsys.readouterr().out.split())
    assert f"skipped solutions/rmsnorm/{NAME}/deprecated_{SOLUTION}.json: a second solution named" in text
    assert "its file name marks it superseded" in text
    assert "skipped definitions/rmsnorm/broken.json: not valid JSON" in text
    assert "skipped workloads/gemm/gemm_gone_s.json: workload of 'gemm_gone', which no definition" in text
    assert "skipped 3 file(s)" in text
    kept = json.loads((out / NAME / "solution.json").read_text())
    assert "return out, rms\n" in kept["sources"][0]["content"]  # the current file, not the deprecated one
    assert json.loads((out / NAME / "workload.json").read_text())["axes"] == {
        "batch_size": 48
    }  # the .json workload


def test_solution_file_chooses_the_copy(published, tmp_path):
    ts = TraceSet.load(published, solution_files=[f"solutions/rmsnorm/{NAME}/deprecated_{SOLUTION}.json"])
    assert "rms * 2" in ts.solutions[SOLUTION].sources[0].content
    assert [s.reason for s in ts.skipped if SOLUTION in s.path] == [
        f"a second solution named {SOLUTION!r}; --solution-file chose "
        f"solutions/rmsnorm/{NAME}/deprecated_{SOLUTION}.json"
    ]
    assert (
        main(
            [
                "suite",
                "import-flashinfer",
                str(published),
                "--out",
                str(tmp_path / "x"),
                "--solution-file",
                "nope.json",
            ]
        )
        == 2
    )


def test_what_was_read_writes_back_as_it_was(published, tmp_path):
    ts = TraceSet.load(published)
    ts.save(tmp_path / "out")
    shutil.copytree(published, tmp_path / "read")
    for s in ts.skipped:  # what the import left out is not written back
        (tmp_path / "read" / s.path).unlink()
    before, after = read_tree(tmp_path / "read"), read_tree(tmp_path / "out")
    assert sorted(after) == sorted(before)
    changed = [rel for rel in after if before[rel] != after[rel]]
    assert changed == [f"solutions/rmsnorm/{NAME}/{SOLUTION}.json"]  # the recognised convention, recorded
    assert after[changed[0]]["spec"]["destination_passing_style"] is False


def test_dict_returning_reference_and_kernel(suite, tmp_path, capsys):
    assert (
        main(["profile", f"{suite}/{NAME}", "--seeds", "0", "--json"]) == 3
    )  # unmeasured: correct, not timed
    prof = json.loads(capsys.readouterr().out)
    assert prof["status"] == "unmeasured" and all(c["passed"] for c in prof["correctness"]), prof["log"]
    kernel = tmp_path / "as_dict.py"
    kernel.write_text(AS_DICT)
    assert main(["profile", f"{suite}/{NAME}", "--solution", str(kernel), "--seeds", "0", "--json"]) == 3


def test_a_failing_reference_is_an_error_not_a_traceback(suite, tmp_path, capsys):
    folder = tmp_path / "s"
    shutil.copytree(suite, folder)
    d = json.loads((folder / NAME / "definition.json").read_text())
    d["reference"] = d["reference"].replace('"inv_rms": inv_rms', '"rms": inv_rms')
    (folder / NAME / "definition.json").write_text(json.dumps(d))
    assert main(["profile", f"{folder}/{NAME}", "--seeds", "0", "--json"]) == 2
    out = json.loads(capsys.readouterr().out)
    assert "the reference returned a dict without output(s) inv_rms (its keys: output, rms)" in out["error"]
    assert main(["profile", f"{folder}/{NAME}", "--seeds", "0"]) == 2
    text = capsys.readouterr().err
    assert "without output(s) inv_rms" in text and "Traceback" not in text


def test_profile_a_flashinfer_solution_file(suite, published, capsys):
    sol = published / "solutions" / "rmsnorm" / NAME / f"{SOLUTION}.json"
    assert "destination_passing_style" not in sol.read_text()  # as published: implicit
    assert main(["profile", f"{suite}/{NAME}", "--solution", str(sol), "--seeds", "0"]) == 3
    assert "value-returning (by its entry function (--convention auto))" in " ".join(
        capsys.readouterr().out.split()
    )
    # forced to the other convention, it fails, and the log names the way out
    assert (
        main(["profile", f"{suite}/{NAME}", "--solution", str(sol), "--seeds", "0", "--convention", "dps"])
        == 1
    )
    assert "--convention value" in " ".join(capsys.readouterr().out.split())
    old = published / "solutions" / "rmsnorm" / NAME / f"deprecated_{SOLUTION}.json"
    assert main(["profile", f"{suite}/{NAME}", "--solution", str(old), "--seeds", "0"]) == 1  # wrong values


def test_export_keeps_the_recorded_traces(suite, tmp_path, capsys):
    assert (suite / NAME / "traces.jsonl").is_file()
    assert main(["suite", "export-flashinfer", str(suite), str(tmp_path / "fib")]) == 0
    assert "and 1 traces" in capsys.readouterr().out
    loaded = load_with_flashinfer(tmp_path / "fib")
    (trace,) = loaded.traces[NAME]
    assert trace.solution == SOLUTION and trace.evaluation.status.value == "PASSED"
    assert trace.evaluation.performance.latency_ms == pytest.approx(0.01)
    assert loaded.get_solution(SOLUTION).spec.destination_passing_style is False
    # and back: the export imports with its trace again
    assert main(["suite", "import-flashinfer", str(tmp_path / "fib"), "--out", str(tmp_path / "again")]) == 0
    assert (tmp_path / "again" / NAME / "traces.jsonl").read_text() == (
        suite / NAME / "traces.jsonl"
    ).read_text()
