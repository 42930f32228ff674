"""`accelopt suite import-nkibench`: a hand-written NKIBench-format folder becomes a suite that
`suites.load_suite` (and so `accelopt run --suite`) reads, with NKIBench's reference semantics."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from nkibench_fixture import CATALOG, FixtureProblem, shaped, write_nkibench

import suites
from accelopt.problem import AxisConst, ScalarInput, load_definition
from cli.main import main
from hardware_agents.neuron.reference import ReferenceModule, kernel_arg_shapes
from hardware_agents.pipeline import inputgen, numpy_ref
from suites.nkibench import NkibenchError, import_nkibench, read_nkibench

UNKNOWN = FixtureProblem(
    "scale_add",
    {"M": 64, "N": 32},
    [
        ("x", ("M", "N")),
        ("y", ("N",), "np.random.uniform(low=-1.0, high=1.0, size={size}).astype(np.float32)"),
    ],
    "  return 2.0 * x + y, x.sum(axis=1)",
    case_id="0",
    comments="a problem NKIBench does not have",
)
RENAMED_KERNEL = """\
import neuronxcc.nki as nki
import neuronxcc.nki.language as nl


@nki.jit
def silu_kernel(x):
    return x
"""


def _folder(tmp_path: Path) -> Path:
    problems = [
        FixtureProblem(
            **{**shaped("silu", M=256, N=512).__dict__, "kernel": RENAMED_KERNEL, "extra_impls": 1}
        ),
        shaped("adamw", M=128, N=64),
        shaped("mamba", M=64, C=8, S=4),
        shaped("add_rmsnorm_matmul", M=64, N=32, K=16),
        shaped("rope_single_freq_apply", B=1, H=2, N=8, D=16),
        shaped("gqa_full", B=1, N=16, QH=4, KH=2, D=8),
        UNKNOWN,
    ]
    write_nkibench(tmp_path / "nkb", problems)
    return tmp_path / "nkb"


@pytest.fixture
def imported(tmp_path: Path) -> dict[str, suites.Problem]:
    report = import_nkibench(_folder(tmp_path), tmp_path / "suite", name="nkb-test")
    assert report.out == str((tmp_path / "suite").resolve())
    return {p.name: p for p in suites.load_suite(report.out)}


def test_suite_layout_and_baselines(imported: dict, tmp_path: Path) -> None:
    info = json.loads((tmp_path / "suite" / "suite.json").read_text())
    assert (info["name"], info["device"], info["language"], info["entry_point"]) == (
        "nkb-test",
        "trn1",
        "nki",
        "kernel.py::kernel",
    )
    assert info["origin"]["format"] == "nkibench"
    assert set(imported) == {
        "silu",
        "adamw",
        "mamba",
        "add_rmsnorm_matmul",
        "rope_single_freq_apply",
        "gqa_full",
        "scale_add",
    }
    silu = imported["silu"]
    assert silu.baseline.spec.language == "nki" and silu.baseline.entry_symbol == "kernel"
    assert "def silu_kernel(x)" in silu.baseline.sources[0].content
    assert (
        silu.baseline.sources[0].content.rstrip().endswith("kernel = silu_kernel  # AccelOpt's entry point")
    )
    assert all(isinstance(a, AxisConst) for a in silu.definition.axes.values())
    assert silu.axis_values() == {"M": 256, "N": 512}
    assert "origin:nkibench" in silu.definition.tags


def test_inputs_inits_scalars_and_derived_axes(imported: dict) -> None:
    adamw = imported["adamw"].definition
    assert list(adamw.inputs) == ["theta", "g", "m", "v"]
    assert adamw.x_input_init == {"v": "abs(normal(0, 1))"}
    mamba = imported["mamba"].definition
    assert mamba.x_input_init == {n: "normal(0, 0.05)" for n in ("delta", "u", "a", "b", "c")}
    assert mamba.x_tolerance is not None and mamba.x_tolerance.rel_l2 == 3e-5
    assert adamw.x_tolerance is not None and adamw.x_tolerance.rel_l2 == 2e-5
    assert set(mamba.x_adversarial or {}) == {"large", "long_memory"}  # the CPU suite's cases
    arm = imported["add_rmsnorm_matmul"]
    assert list(arm.definition.inputs) == ["x", "w", "eps", "z", "g"]
    assert arm.definition.inputs["eps"].shape is None
    assert arm.workload.inputs["eps"] == ScalarInput(value=1e-5)
    rope = imported["rope_single_freq_apply"]
    assert rope.definition.inputs["x"].shape == ["D", "T"] and rope.definition.inputs["freqs_cos"].shape == [
        "D2",
        "T",
    ]
    assert rope.axis_values()["T"] == 1 * 2 * 8 and rope.axis_values()["D2"] == 8
    assert rope.definition.constraints == ["T == B * H * N", "D2 == D // 2"]


def test_reference_is_nkibench_forward_with_its_transforms(imported: dict) -> None:
    for name, p in imported.items():
        src = p.definition.x_numpy_reference
        assert (
            "def get_inputs" in src and "def transform_to_nki_inputs" in src and "def run(*inputs)" in src
        ), name
        ref = ReferenceModule(p)
        assert ref.to_nki is not None and ref.from_nki is not None
        case = inputgen.input_cases(p.definition, (0,))[0]
        inputs = inputgen.make_inputs(p, case)
        ours = numpy_ref.reference_outputs(p, inputs)  # float64, through `run`
        direct = ref.namespace["forward"](*inputs.values())  # NKIBench's forward in float32
        direct = direct if isinstance(direct, tuple) else (direct,)
        for got, want in zip(ours.values(), direct, strict=True):
            np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
    adamw = imported["adamw"]
    v = inputgen.make_inputs(adamw, inputgen.input_cases(adamw.definition, (0,))[0])["v"]
    assert v.min() >= 0  # abs(normal)
    mamba = imported["mamba"]
    delta = inputgen.make_inputs(mamba, inputgen.input_cases(mamba.definition, (0,))[0])["delta"]
    assert 0.03 < float(delta.std()) < 0.07  # scale 0.05
    assert kernel_arg_shapes(imported["add_rmsnorm_matmul"]) == [
        ("array", (64, 16), "float32"),
        ("array", (16, 32), "float32"),
        ("scalar", None, "1e-05"),
        ("array", (64, 16), "float32"),
        ("array", (16,), "float32"),
    ]


def test_roofline_reused_from_the_cpu_suite(imported: dict) -> None:
    for name in ("silu", "adamw", "mamba", "add_rmsnorm_matmul", "rope_single_freq_apply", "gqa_full"):
        cpu = load_definition(Path(suites.__file__).parent / "cpu" / name / "definition.json")
        assert imported[name].definition.x_roofline == cpu.x_roofline, name
        assert imported[name].definition.op_type == cpu.op_type


def test_unknown_problem(imported: dict) -> None:
    p = imported["scale_add"]
    assert {n: s.shape for n, s in p.definition.outputs.items()} == {"out0": ["M", "N"], "out1": ["M"]}
    assert p.definition.x_input_init == {"y": "uniform(-1, 1)"}
    roof = p.definition.x_roofline
    assert roof is not None and roof.flops_matmul == "0" and roof.bytes_min == "4 * (M*N + N + M*N + M)"
    assert "a problem NKIBench does not have" in (p.definition.description or "")
    assert p.definition.x_tolerance is not None and p.definition.x_tolerance.rel_l2 == 2e-5


def test_notes_and_multiple_cases(tmp_path: Path) -> None:
    root = _folder(tmp_path)
    notes = {p.folder: p.notes for p in read_nkibench(root)}
    assert any("1 more implementation" in n for n in notes["silu"])
    assert any("aliased as `kernel`" in n for n in notes["silu"])
    assert any("memory traffic only" in n for n in notes["scale_add"])
    summary = json.loads((root / "summary.json").read_text())
    summary["silu"]["cases"]["7"] = summary["silu"]["cases"]["2"]
    (root / "summary.json").write_text(json.dumps(summary))
    folders = {p.folder for p in read_nkibench(root)}
    assert "silu_M256_N512" in folders and "silu" not in folders


def test_errors_name_the_file(tmp_path: Path) -> None:
    with pytest.raises(NkibenchError, match=r"summary\.json: cannot read"):
        read_nkibench(tmp_path)
    root = _folder(tmp_path)
    ref = next((root / "reference").glob("silu_*.py"))
    ref.write_text(ref.read_text().replace("M = 256", "M = 512"))
    with pytest.raises(NkibenchError, match=r"M = 512, but summary.json says M = 256"):
        read_nkibench(root)
    ref.write_text(
        ref.read_text()
        .replace("M = 512", "M = 256")
        .replace("    x = np.random", "    print()\n    x = np.random")
    )
    with pytest.raises(NkibenchError, match="get_inputs: unsupported statement `print\\(\\)`"):
        read_nkibench(root)


def test_refuses_to_overwrite_without_force(tmp_path: Path) -> None:
    root = _folder(tmp_path)
    import_nkibench(root, tmp_path / "s")
    with pytest.raises(NkibenchError, match="--force"):
        import_nkibench(root, tmp_path / "s")
    import_nkibench(root, tmp_path / "s", overwrite=True)
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "keep.txt").write_text("x")
    with pytest.raises(NkibenchError, match="not a suite folder"):
        import_nkibench(root, tmp_path / "other", overwrite=True)
    assert (tmp_path / "other" / "keep.txt").exists()


def test_cli_writes_a_suite_found_by_name(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    monkeypatch.delenv("ACCELOPT_SUITES_PATH", raising=False)
    write_nkibench(tmp_path / "nkb", [CATALOG["silu"], CATALOG["matmul"]])  # NKIBench shapes: nothing is run
    assert main(["suite", "import-nkibench", str(tmp_path / "nkb"), "--device", "trn2"]) == 0
    out = capsys.readouterr().out
    assert "accelopt run --suite nkibench --device trn2" in out
    assert (tmp_path / "xdg" / "accelopt" / "suites" / "nkibench" / "suite.json").is_file()
    assert "nkibench" in suites.list_suites() and "cpu" in suites.list_suites()
    mm = suites.get_problem("nkibench/matmul")
    assert mm.axis_values() == {"M": 4096, "N": 12288, "K": 5120}
    assert suites.suite_info("nkibench").device == "trn2"
    assert main(["suite", "import-nkibench", str(tmp_path / "nowhere")]) == 1
    assert "import failed" in capsys.readouterr().err
