"""Definitions whose inputs are all blobs (a MoE layer: routing logits, fp8 weights and their
scales), published without the blobs: drawing every missing input is a choice made at import
(`--synthesize-missing`), never silent, each input listed with the range it is drawn from;
an integer input the definition gives no range for cannot be drawn (no valid values are
known). A problem whose constant axes alone are too large for the interpreter is `unchecked`
(exit 4), with the reason and "check it on a GPU", instead of a timeout that ran nothing."""

from __future__ import annotations

import json
from pathlib import Path

import flashinfer_bench as fib
import pytest
from flashinfer_bench.data import save_json_file

from cli.main import main
from suites.flashinfer import FlashInferImportError, TraceSet, problems_from

REF = """import torch


def run(x, w, w_scale, expert):
    return (x.float() @ (w.float() * w_scale).T).to(torch.bfloat16)
"""


def _write(root: Path, *, experts_range: bool, hidden: int = 64) -> Path:
    d = fib.Definition(
        name=f"scaled_gemm_h{hidden}",
        op_type="moe",
        axes={"T": fib.AxisVar(), "H": fib.AxisConst(value=hidden), "N": fib.AxisConst(value=32)},
        inputs={
            "x": fib.TensorSpec(shape=["T", "H"], dtype="float8_e4m3fn"),
            "w": fib.TensorSpec(shape=["N", "H"], dtype="float8_e4m3fn"),
            "w_scale": fib.TensorSpec(shape=["N", "H"], dtype="float32"),
            "expert": fib.TensorSpec(shape=["T"], dtype="int32"),
        },
        outputs={"out": fib.TensorSpec(shape=["T", "N"], dtype="bfloat16")},
        reference=REF,
    )
    raw = json.loads(d.model_dump_json(exclude_unset=True))
    if experts_range:
        raw["x_input_init"] = {"expert": "randint(0, 8)"}  # our extension: the range the definition allows
    (root / "definitions" / "moe").mkdir(parents=True)
    (root / "definitions" / "moe" / f"{d.name}.json").write_text(json.dumps(raw))
    blob = f"./blob/workloads/moe/{d.name}/{d.name}_gone.safetensors"
    inputs = {n: fib.SafetensorsInput(path=blob, tensor_key=n) for n in ("x", "w", "w_scale", "expert")}
    w = fib.Workload(uuid="w-moe", axes={"T": 40}, inputs=inputs)
    save_json_file(fib.Trace(definition=d.name, workload=w), root / "workloads" / "moe" / f"{d.name}.json")
    return root


def test_drawing_missing_inputs_is_a_choice_listed_per_input(tmp_path):
    ts = TraceSet.load(_write(tmp_path / "a", experts_range=True))
    with pytest.raises(FlashInferImportError, match="not index inputs: pass --synthesize-missing"):
        problems_from(ts)
    (p,) = problems_from(ts, synthesize_missing=True)
    assert p.workload.inputs == {}  # every input left to the generator
    note = next(n for n in ts.notes if "synthesized at random" in n)
    assert (
        "input x (float8_e4m3fn) synthesized at random (its blob is missing): normal(0, 1) (clamped" in note
    )
    assert "input w_scale (float32) synthesized at random (its blob is missing): normal(0, 1)" in note
    assert "input expert (int32) synthesized at random (its blob is missing): randint(0, 8)" in note
    assert note.endswith("not the recorded data")


def test_an_integer_input_without_a_range_is_not_drawn(tmp_path):
    ts = TraceSet.load(_write(tmp_path / "b", experts_range=False))
    with pytest.raises(
        FlashInferImportError, match=r"integer input\(s\) expert have no value range in the definition"
    ):
        problems_from(ts, synthesize_missing=True)
    assert problems_from(ts, synthesize_missing=True, skip_missing_blobs=True) == []
    assert any("w-moe skipped" in n and "expert have no value range" in n for n in ts.notes), ts.notes


def test_constant_axes_too_large_to_interpret_are_unchecked(tmp_path, capsys):
    src = _write(tmp_path / "c", experts_range=True, hidden=1 << 20)  # w alone: 32 x 1M
    out = tmp_path / "suite"
    assert main(["suite", "import-flashinfer", str(src), "--out", str(out), "--synthesize-missing"]) == 0
    text = " ".join(capsys.readouterr().out.split())
    assert "no check workloads" in text and "profile it on a GPU" in text
    assert main(["profile", f"{out}/scaled_gemm_h1048576", "--seeds", "0", "--json"]) == 4
    prof = json.loads(capsys.readouterr().out)
    assert prof["status"] == "unchecked" and prof["wall_s"] < 5, prof
    assert "constant axes alone hold" in prof["log"] and "w[32, 1048576]" in prof["log"]
    assert prof["log"].endswith("check it on a GPU")
