"""Round trips through the real FlashInfer-Bench (0.1.2, its own classes, writers and loader):

- a folder FlashInfer-Bench itself wrote (tag-less axes, `{}` inputs, a solution without
  `destination_passing_style`, NaN/Infinity errors, a blob) reads into our schema and writes
  back with nothing lost (the one change: the calling convention we recognised is recorded);
- every suite (cpu, triton, an imported NKIBench-format suite) exports, loads in
  FlashInfer-Bench with every record counted, and imports back to the same problems; and
  what FlashInfer-Bench writes of it with its own writers imports back with FlashInfer-Bench's
  fields unchanged."""

from __future__ import annotations

import math
import sys
from pathlib import Path

import flashinfer_bench as fib
import msgspec
import pytest
from fib_helpers import counts, load_with_flashinfer, read_tree, write_fib_set
from flashinfer_bench.data import save_json_file
from testdirs import NEURON

import suites
from accelopt.problem import AxisConst, AxisVar, RandomInput, SafetensorsInput
from suites.flashinfer import TraceSet, export_problems, problems_from

sys.path.insert(0, str(NEURON))
from nkibench_fixture import shaped, write_nkibench


def test_a_folder_flashinfer_wrote_reads_and_writes_back_losslessly(tmp_path):
    src = write_fib_set(tmp_path / "src")
    ts = TraceSet.load(src)
    rms = ts.definitions["rmsnorm_h64"]
    assert isinstance(rms.axes["batch_size"], AxisVar) and rms.axes["hidden_size"] == AxisConst(value=64)
    assert [w.uuid for w in ts.workloads["rmsnorm_h64"]] == ["w-r-24", "w-r-2", "w-r-5", "w-r-9"]
    assert isinstance(ts.workloads["rmsnorm_h64"][2].inputs["hidden_states"], SafetensorsInput)
    assert ts.workloads["gemm_n32_k48"][1].inputs == {"A": RandomInput(), "B": RandomInput()}  # written as {}
    assert set(ts.solutions) == {"rmsnorm_h64_triton_v1", "rmsnorm_h64_cuda_v2", "gemm_n32_k48_torch"}
    # no destination_passing_style in the file; `run(hidden_states, weight)` returns its output
    assert ts.solutions["rmsnorm_h64_triton_v1"].spec.destination_passing_style is False
    assert any("rmsnorm_h64_triton_v1" in n and "value-returning" in n for n in ts.notes)
    assert ts.solutions["rmsnorm_h64_cuda_v2"].spec.destination_passing_style is True  # not inferred for CUDA
    statuses = [t.evaluation.status for t in ts.traces if t.evaluation]
    assert statuses == ["PASSED", "INCORRECT_NUMERICAL", "RUNTIME_ERROR"]
    bad = ts.traces[1].evaluation.correctness
    assert math.isnan(bad.max_relative_error) and bad.max_absolute_error == math.inf
    assert list(rms.inputs) == ["hidden_states", "weight"]  # calling order kept

    ts.save(tmp_path / "out")
    before, after = read_tree(src), read_tree(tmp_path / "out")
    assert sorted(before) == sorted(after)
    changed = [rel for rel in before if before[rel] != after[rel]]
    assert changed == ["solutions/baseline/rmsnorm/rmsnorm_h64/rmsnorm_h64_triton_v1.json"]
    spec_before = before[changed[0]]["spec"]
    assert after[changed[0]]["spec"] == {**spec_before, "destination_passing_style": False}
    assert after["definitions/rmsnorm/rmsnorm_h64.json"]["axes"]["batch_size"] == {}  # still tag-less
    # FlashInfer-Bench reads both the same, but for the recorded convention
    a, b = load_with_flashinfer(src), load_with_flashinfer(tmp_path / "out")
    assert counts(a) == counts(b) == {"definitions": 2, "solutions": 3, "workloads": 6, "traces": 3}
    assert a.definitions == b.definitions and a.workloads == b.workloads
    assert [t.model_dump_json() for ts_ in a.traces.values() for t in ts_] == [
        t.model_dump_json() for ts_ in b.traces.values() for t in ts_
    ]  # JSON: NaN == NaN
    assert b.get_solution("rmsnorm_h64_triton_v1").spec.destination_passing_style is False
    assert a.get_solution("rmsnorm_h64_triton_v1").spec.destination_passing_style is True  # FIB's default
    # a second trip is a fixed point
    TraceSet.load(tmp_path / "out").save(tmp_path / "out2")
    assert read_tree(tmp_path / "out2") == after


@pytest.fixture(scope="module")
def nkibench_suite(tmp_path_factory: pytest.TempPathFactory) -> str:
    from suites.nkibench import import_nkibench

    root = tmp_path_factory.mktemp("nkb")
    write_nkibench(
        root / "src",
        [
            shaped("silu", M=64, N=128),
            shaped("adamw", M=32, N=64),
            shaped("add_rmsnorm_matmul", M=16, N=32, K=16),
        ],
    )
    return import_nkibench(root / "src", root / "suite", name="nkb-fib").out


def _fib_rewrite(src: Path, dest: Path) -> fib.TraceSet:
    """What FlashInfer-Bench writes of a folder it loaded, with its own writers."""
    loaded = load_with_flashinfer(src)
    out = fib.TraceSet.from_path(str(dest))
    for d in loaded.definitions.values():
        save_json_file(d, dest / "definitions" / d.op_type / f"{d.name}.json")
        out.definitions[d.name] = d
    for name, sols in loaded.solutions.items():
        for s in sols:
            save_json_file(
                s, dest / "solutions" / s.author / out.definitions[name].op_type / name / f"{s.name}.json"
            )
    for wls in loaded.workloads.values():
        out.add_workload_traces(wls)
    return loaded


@pytest.mark.parametrize("suite", ["cpu", "triton", "nkibench"])
def test_every_suite_round_trips_through_flashinfer(suite, tmp_path, nkibench_suite):
    problems = suites.load_suite(nkibench_suite if suite == "nkibench" else suite)
    ts = export_problems(problems, tmp_path / "fib")
    loaded = load_with_flashinfer(tmp_path / "fib")
    n_workloads = sum(1 + len(p.check_workloads) for p in problems)
    fib_solutions = [p.baseline for p in problems if p.baseline.spec.language in ("triton", "python")]
    assert counts(loaded) == {
        "definitions": len(problems),
        "solutions": len(fib_solutions),
        "workloads": n_workloads,
        "traces": 0,
    }
    # C and NKI baselines travel under x_solutions/, which FlashInfer-Bench does not read
    others = [p for p in problems if p.baseline.spec.language not in ("triton", "python")]
    assert len(list((tmp_path / "fib" / "x_solutions").rglob("*.json"))) == len(others)
    assert len(ts.notes) == len(others)
    back = {p.name: p for p in problems_from(TraceSet.load(tmp_path / "fib"))}
    assert set(back) == {p.name for p in problems}
    for p in problems:
        assert back[p.name] == p, p.name  # definition (x_ fields too), workloads, check workloads, baseline

    # FlashInfer-Bench's own writers drop what it does not model (x_ fields, x_solutions/): the rest
    # comes back unchanged
    _fib_rewrite(tmp_path / "fib", tmp_path / "rewritten")
    again = TraceSet.load(tmp_path / "rewritten")
    for p in problems:
        d = again.definitions[p.name]
        plain = msgspec.structs.replace(p.definition, **_x_fields_at_their_defaults(p.definition))
        assert d == plain, p.name
        ws = {w.uuid: w for w in again.workloads[p.name]}
        for w in (p.workload, *p.check_workloads):
            assert ws[w.uuid].axes == w.axes
            ours = {n: i for n, i in ws[w.uuid].inputs.items() if not isinstance(i, SafetensorsInput)}
            assert ours == {n: i for n, i in w.inputs.items() if not isinstance(i, SafetensorsInput)}


def _x_fields_at_their_defaults(d: object) -> dict[str, object]:
    """Every `x_` field of a Definition (ours; FlashInfer-Bench's writers drop them) at its default."""
    out: dict[str, object] = {}
    for f in msgspec.structs.fields(d):  # type: ignore[arg-type]
        if f.name.startswith("x_"):
            out[f.name] = f.default_factory() if f.default is msgspec.NODEFAULT else f.default
    return out
