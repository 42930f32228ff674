"""The problem schema: FlashInfer field compatibility, x_ extensions, and load-time validation."""

from __future__ import annotations

import json
from pathlib import Path

import msgspec
import pytest

import suites
from accelopt.problem import (
    Definition,
    ProblemFileError,
    Trace,
    Workload,
    load_definition,
    load_solution,
    load_traces,
    load_workload,
    to_json,
)

# FlashInfer-Bench's field names (docs: Definition, TensorSpec, Workload, Solution, BuildSpec).
FIB_DEFINITION = {
    "name",
    "op_type",
    "axes",
    "inputs",
    "outputs",
    "reference",
    "tags",
    "description",
    "constraints",
}
FIB_SOLUTION = {"name", "definition", "author", "spec", "sources", "description"}
FIB_BUILD = {
    "language",
    "target_hardware",
    "entry_point",
    "dependencies",
    "destination_passing_style",
    "binding",
}


def _definition_json() -> dict:
    p = suites.get_problem("cpu/matmul")
    return json.loads(to_json(p.definition))


def _write(tmp_path: Path, obj: object, name: str = "def.json") -> Path:
    path = tmp_path / name
    path.write_text(obj if isinstance(obj, str) else json.dumps(obj))
    return path


def test_fields_are_flashinfer_names_or_x_extensions() -> None:
    p = suites.get_problem("cpu/add_rmsnorm_matmul")
    d = json.loads(to_json(p.definition))
    assert {k for k in d if not k.startswith("x_")} <= FIB_DEFINITION
    assert {"x_numpy_reference", "x_roofline"} <= set(d)
    assert d["axes"]["M"] == {"type": "var"}
    assert list(d["inputs"]) == ["x", "w", "z", "g"]  # order is the calling order
    s = json.loads(to_json(p.baseline))
    assert set(s) <= FIB_SOLUTION and set(s["spec"]) <= FIB_BUILD
    assert s["spec"]["entry_point"] == "baseline.c::kernel"


def test_round_trip(tmp_path: Path) -> None:
    p = suites.get_problem("cpu/mamba")
    path = tmp_path / "d.json"
    path.write_bytes(to_json(p.definition))
    assert load_definition(path) == p.definition
    spath = tmp_path / "s.json"
    spath.write_bytes(to_json(p.baseline))
    assert load_solution(spath) == p.baseline


def test_unknown_fields_are_ignored_like_flashinfer(tmp_path: Path) -> None:
    d = _definition_json() | {"some_future_field": 1}
    assert load_definition(_write(tmp_path, d)).name == "matmul"


@pytest.mark.parametrize(
    ("mutate", "needle"),
    [
        (lambda d: d["axes"]["M"].update(type="cons"), "axes"),
        (lambda d: d.pop("reference"), "reference"),
        (lambda d: d["inputs"]["lhs"].update(dtype="float64"), "dtype"),
        (lambda d: d["inputs"]["lhs"].update(shape=["M", "Q"]), "inputs.lhs.shape"),
        (lambda d: d.update(reference="import torch\n"), "reference: must be Python source defining"),
        (lambda d: d.update(x_numpy_reference="def forward(x): pass"), "x_numpy_reference"),
        (lambda d: d["x_roofline"].update(flops_matmul="__import__('os')"), "x_roofline.flops_matmul"),
        (lambda d: d["x_roofline"].update(bytes_min="4 * M * Z"), "x_roofline.bytes_min: unknown axes ['Z']"),
        (lambda d: d.update(x_input_init={"nope": "normal(0, 1)"}), "x_input_init.nope"),
        (lambda d: d.update(x_adversarial={"big": {"nope": "1"}}), "x_adversarial.big.nope"),
        (lambda d: d["outputs"].update(lhs=d["outputs"]["out"]), "outputs.lhs: also an input"),
    ],
)
def test_malformed_definition_names_file_and_field(tmp_path: Path, mutate, needle: str) -> None:  # type: ignore[no-untyped-def]
    d = _definition_json()
    mutate(d)
    path = _write(tmp_path, d)
    with pytest.raises(ProblemFileError) as e:
        load_definition(path)
    assert str(path) in str(e.value)
    assert needle in str(e.value)


def test_not_json_and_missing_file(tmp_path: Path) -> None:
    with pytest.raises(ProblemFileError, match="not valid JSON"):
        load_definition(_write(tmp_path, "{nope"))
    with pytest.raises(ProblemFileError, match="cannot read"):
        load_definition(tmp_path / "missing.json")


def test_solution_validation(tmp_path: Path) -> None:
    s = json.loads(to_json(suites.get_problem("cpu/silu").baseline))
    for mutate, needle in [
        (lambda s: s["spec"].update(entry_point="baseline.c"), "spec.entry_point"),
        (lambda s: s["sources"][0].update(path="../evil.c"), "sources.../evil.c"),
        (lambda s: s["spec"].update(language="fortran"), "language"),
        (lambda s: s["spec"].update(entry_point="other.c::kernel"), "entry file is not among the sources"),
    ]:
        bad = json.loads(json.dumps(s))
        mutate(bad)
        with pytest.raises(ProblemFileError, match=needle.replace(".", r"\.")):
            load_solution(_write(tmp_path, bad, "s.json"))


def test_workload_from_plain_object_or_flashinfer_trace_line(tmp_path: Path) -> None:
    p = suites.get_problem("cpu/matmul")
    w = {"uuid": "u1", "axes": {"M": 8, "N": 8, "K": 8}, "inputs": {"lhs": {"type": "random"}}}
    assert load_workload(_write(tmp_path, w, "w.json"), p.definition).axes["K"] == 8
    trace = {"definition": "matmul", "solution": None, "evaluation": None, "workload": w}
    assert load_workload(_write(tmp_path, trace, "t.json"), p.definition).uuid == "u1"
    with pytest.raises(ProblemFileError, match=r"axes\.K: value missing"):
        load_workload(_write(tmp_path, {"uuid": "u", "axes": {"M": 1, "N": 1}}, "w2.json"), p.definition)
    with pytest.raises(ProblemFileError, match=r"inputs\.zz"):
        load_workload(_write(tmp_path, {**w, "inputs": {"zz": {"type": "random"}}}, "w3.json"), p.definition)


def test_traces_jsonl(tmp_path: Path) -> None:
    line = {
        "definition": "matmul",
        "workload": {"uuid": "u", "axes": {"M": 1}},
        "solution": "s",
        "evaluation": {
            "status": "PASSED",
            "environment": {"hardware": "cpu"},
            "timestamp": "t",
            "correctness": {"max_relative_error": 0.0, "max_absolute_error": 0.0},
            "performance": {"latency_ms": 1.0},
            "x_pct_peak": 0.5,
        },
    }
    path = tmp_path / "t.jsonl"
    path.write_text(json.dumps(line) + "\n\n" + json.dumps(line) + "\n")
    traces = load_traces(path)
    assert len(traces) == 2 and isinstance(traces[0], Trace)
    assert traces[0].evaluation is not None and traces[0].evaluation.x_pct_peak == 0.5


def test_problem_helpers() -> None:
    p = suites.get_problem("cpu/gqa_full")
    assert p.axis_values() == {"B": 1, "N": 256, "QH": 8, "KH": 4, "D": 64}
    assert p.input_shapes()["k"] == (1, 256, 4, 64)
    assert p.output_shapes() == {"out": (1, 8, 256, 64)}
    assert p.content_hash() == suites.get_problem("cpu/gqa_full").content_hash()
    assert p.content_hash() != suites.get_problem("cpu/matmul").content_hash()
    other = msgspec.structs.replace(p, workload=Workload(uuid="x", axes={**p.workload.axes, "N": 128}))
    assert other.content_hash() != p.content_hash()
    assert isinstance(p.definition, Definition)


def test_suite_api_errors() -> None:
    with pytest.raises(KeyError, match="SUITE/PROBLEM"):
        suites.get_problem("matmul")
    with pytest.raises(KeyError, match="no problem"):
        suites.get_problem("cpu/nope")
    with pytest.raises(KeyError, match="no suite"):
        suites.load_suite("nope")
    assert len(suites.load_suite("cpu")) == 14
