"""Importing FlashInfer-Bench folders as they are published, without hand edits (folders built
with FlashInfer-Bench's own classes and writers):

- entry points `run(*args, **kwargs)` that return their outputs, with no
  `destination_passing_style` in the file: the convention comes from the return statements,
  can be chosen at import (`--convention`, `--solution-convention NAME=...`), and a profile
  that fails the way the other convention would explain says so;
- a definition with one huge workload gets small check workloads derived from its variable
  axes (the interpreter would otherwise run the production shape and time out; a small one
  is left as it is, so our own exports round-trip);
- workloads whose index blobs are missing: an error that names the way out, or indices
  synthesized when asked (`--synthesize-indices`), never silently;
- `--definitions` / `--solution-convention` naming nothing that exists: an error listing
  what does."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import flashinfer_bench as fib
import pytest
from flashinfer_bench.data import save_json_file

from cli.main import main
from suites.flashinfer import FlashInferImportError, TraceSet, problems_from

RMS_REF = (
    "import torch\n\ndef run(hidden_states, weight):\n    x = hidden_states.to(torch.float32)\n"
    "    y = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * weight.float()\n"
    "    return y.to(hidden_states.dtype)\n"
)
# the published style: *args, returns its output, launches a Triton kernel
RMS_VALUE = """import torch
import triton
import triton.language as tl


@triton.jit
def _k(x_ptr, w_ptr, o_ptr, H: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, H)
    x = tl.load(x_ptr + row * H + offs).to(tl.float32)
    w = tl.load(w_ptr + offs).to(tl.float32)
    tl.store(o_ptr + row * H + offs, (x * tl.rsqrt(tl.sum(x * x, axis=0) / H + 1e-6) * w).to(tl.bfloat16))


def run(*args, **kwargs):
    hidden_states, weight = args[0], args[1]
    out = torch.empty_like(hidden_states)
    _k[(hidden_states.shape[0],)](hidden_states, weight, out, H=hidden_states.shape[1])
    return out
"""
# destination-passing, but with a signature that tells nothing either
RMS_DPS = RMS_VALUE.replace(
    """    out = torch.empty_like(hidden_states)
    _k[(hidden_states.shape[0],)](hidden_states, weight, out, H=hidden_states.shape[1])
    return out""",
    """    out = args[2]
    _k[(hidden_states.shape[0],)](hidden_states, weight, out, H=hidden_states.shape[1])""",
)
SEGSUM_REF = (
    "import torch\n\ndef run(x, indptr):\n    return torch.stack([x[indptr[i]:indptr[i + 1]].sum(0) "
    "for i in range(indptr.numel() - 1)])\n"
)


def _sol(name: str, definition: str, content: str, language: str = "triton") -> fib.Solution:
    return fib.Solution(
        name=name,
        definition=definition,
        author="someone",
        spec=fib.BuildSpec(language=language, target_hardware=["NVIDIA_H100"], entry_point="main.py::run"),
        sources=[fib.SourceFile(path="main.py", content=content)],
    )


def write_published(root: Path) -> Path:
    """rmsnorm_h64 with one production workload (520,128 rows) and two *args solutions; a
    segment sum whose index input is a safetensors blob that is not in the folder."""
    rms = fib.Definition(
        name="rmsnorm_h64",
        op_type="rmsnorm",
        description="RMSNorm, hidden 64",
        axes={"batch_size": fib.AxisVar(), "hidden_size": fib.AxisConst(value=64)},
        inputs={
            "hidden_states": fib.TensorSpec(shape=["batch_size", "hidden_size"], dtype="bfloat16"),
            "weight": fib.TensorSpec(shape=["hidden_size"], dtype="bfloat16"),
        },
        outputs={"output": fib.TensorSpec(shape=["batch_size", "hidden_size"], dtype="bfloat16")},
        reference=RMS_REF,
    )
    seg = fib.Definition(
        name="segment_sum_h8",
        op_type="segment",
        description="per-segment sums",
        axes={
            "batch_size": fib.AxisVar(),
            "len_indptr": fib.AxisVar(),
            "total": fib.AxisVar(),
            "hidden": fib.AxisConst(value=8),
        },
        constraints=["len_indptr == batch_size + 1", "total == indptr[-1].item()"],
        inputs={
            "x": fib.TensorSpec(shape=["total", "hidden"], dtype="float32"),
            "indptr": fib.TensorSpec(shape=["len_indptr"], dtype="int32"),
        },
        outputs={"out": fib.TensorSpec(shape=["batch_size", "hidden"], dtype="float32")},
        reference=SEGSUM_REF,
    )
    ts = fib.TraceSet.from_path(str(root))
    for d in (rms, seg):
        save_json_file(d, root / "definitions" / d.op_type / f"{d.name}.json")
        ts.definitions[d.name] = d
    for s in (_sol("rms_value", "rmsnorm_h64", RMS_VALUE), _sol("rms_dps", "rmsnorm_h64", RMS_DPS)):
        save_json_file(s, root / "solutions" / s.author / "rmsnorm" / s.definition / f"{s.name}.json")
    ts.add_workload_traces(
        [
            fib.Trace(
                definition="rmsnorm_h64",
                workload=fib.Workload(
                    uuid="w-big",
                    axes={"batch_size": 520_128},
                    inputs={"hidden_states": fib.RandomInput(), "weight": fib.RandomInput()},
                ),
            )
        ]
    )
    missing: dict[str, Any] = {
        "x": fib.RandomInput(),
        "indptr": fib.SafetensorsInput(
            path="./blob/workloads/segment/segment_sum_h8/gone.safetensors", tensor_key="indptr"
        ),
    }
    ts.add_workload_traces(
        [
            fib.Trace(
                definition="segment_sum_h8",
                workload=fib.Workload(
                    uuid="w-seg", axes={"batch_size": 40, "len_indptr": 41, "total": 900_000}, inputs=missing
                ),
            )
        ]
    )
    return root


@pytest.fixture(scope="module")
def published(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_published(tmp_path_factory.mktemp("published"))


def test_args_kwargs_entry_points_get_their_convention_from_their_returns(published):
    ts = TraceSet.load(published)
    assert ts.solutions["rms_value"].spec.destination_passing_style is False
    assert ts.solutions["rms_dps"].spec.destination_passing_style is True
    assert any("rms_value: value-returning by its entry's return statements" in n for n in ts.notes), ts.notes
    chosen = TraceSet.load(published, convention="value", conventions={"rms_value": "dps"})
    assert chosen.solutions["rms_value"].spec.destination_passing_style is True  # per solution, over all
    assert chosen.solutions["rms_dps"].spec.destination_passing_style is False
    with pytest.raises(FlashInferImportError, match=r"no solution named nope.*rms_dps, rms_value"):
        TraceSet.load(published, conventions={"nope": "dps"})


def test_a_single_huge_workload_gets_derived_check_workloads(published, interp_agent):
    ts = TraceSet.load(published)
    rms = {p.name: p for p in problems_from(ts, definitions=["rmsnorm_h64"])}["rmsnorm_h64"]
    sizes = [w.axes["batch_size"] for w in rms.check_workloads]
    assert len(sizes) == 2 and all(2 <= b * 64 <= 1 << 15 for b in sizes), sizes
    assert any("small check workload(s) derived" in n for n in ts.notes)
    prof = interp_agent.profile(rms, ts.solutions["rms_value"], seeds=(0,))
    assert prof.status == "unmeasured", prof.log
    assert "520128" not in prof.log and "derived-1" in prof.log


def test_a_profile_failing_the_other_conventions_way_says_so(published, interp_agent):
    ts = TraceSet.load(published, conventions={"rms_value": "dps", "rms_dps": "value"})
    rms = {p.name: p for p in problems_from(ts, definitions=["rmsnorm_h64"])}["rmsnorm_h64"]
    as_dps = interp_agent.profile(rms, ts.solutions["rms_value"], seeds=(0,))
    assert as_dps.status in ("runtime_error", "incorrect"), as_dps.log
    text = as_dps.log + " ".join(c.note for c in as_dps.correctness)
    assert "hint: the solution is destination-passing" in text and "--convention value" in text, text
    as_value = interp_agent.profile(rms, ts.solutions["rms_dps"], seeds=(0,))
    assert as_value.status in ("runtime_error", "incorrect"), as_value.log
    assert "hint: the solution is value-returning" in as_value.log and "--convention dps" in as_value.log


def test_missing_index_blobs_are_synthesized_only_when_asked(published, interp_agent):
    with pytest.raises(FlashInferImportError, match=r"gone\.safetensors is missing.*--synthesize-indices"):
        problems_from(TraceSet.load(published), definitions=["segment_sum_h8"])
    ts = TraceSet.load(published)
    (seg,) = problems_from(ts, definitions=["segment_sum_h8"], synthesize_indices=True)
    assert "indptr" not in seg.workload.inputs  # left to the input generator
    assert any("index inputs indptr synthesized" in n for n in ts.notes), ts.notes
    derived = [w.axes for w in seg.check_workloads]
    assert derived and all(a["len_indptr"] == a["batch_size"] + 1 for a in derived), derived
    prof = interp_agent.profile(seg, seg.baseline, seeds=(0,))
    assert prof.status == "unmeasured", prof.log  # the reference baseline, on synthesized indices


def test_cli_names_what_exists(published, tmp_path, capsys):
    out = tmp_path / "suite"
    assert (
        main(["suite", "import-flashinfer", str(published), "--out", str(out), "--definitions", "nope"]) == 2
    )
    text = capsys.readouterr().err
    assert "no definition named nope" in text and "rmsnorm_h64" in text and "segment_sum_h8" in text
    assert not (out / "suite.json").exists()
    assert (
        main(
            [
                "suite",
                "import-flashinfer",
                str(published),
                "--out",
                str(out),
                "--solution-convention",
                "rms_value",
            ]
        )
        == 2
    )
    assert (
        main(
            [
                "suite",
                "import-flashinfer",
                str(published),
                "--out",
                str(out),
                "--synthesize-indices",
                "--solution-convention",
                "rms_value=dps",
            ]
        )
        == 0
    )
    text = capsys.readouterr().out
    assert "rms_value: destination_passing_style=true (chosen at import)" in text.replace("\n", " ")
