"""A FlashInfer-Bench folder written by hand imports into our schema and exports back
losslessly: the same files, the same JSON (fields we do not model, explicit nulls, NaN and
Infinity written as strings, line order), and the blob."""

from __future__ import annotations

import math

from fib_fixture import BLOB, read_tree, write_trace_set

from accelopt.problem import SafetensorsInput
from suites.flashinfer import TraceSet


def test_import_reads_every_record(tmp_path):
    ts = TraceSet.load(write_trace_set(tmp_path / "src"))
    assert set(ts.definitions) == {"rmsnorm_h64", "gemm_n32_k48"}
    assert [w.uuid for w in ts.workloads["rmsnorm_h64"]] == ["w-r-24", "w-r-2", "w-r-5", "w-r-9"]
    assert isinstance(ts.workloads["rmsnorm_h64"][2].inputs["hidden_states"], SafetensorsInput)
    assert set(ts.solutions) == {"rmsnorm_h64_triton_v1", "rmsnorm_h64_cuda_v2", "gemm_n32_k48_torch"}
    assert not ts.solutions["rmsnorm_h64_triton_v1"].spec.destination_passing_style
    statuses = [t.evaluation.status for t in ts.traces if t.evaluation]
    assert statuses == ["PASSED", "INCORRECT_NUMERICAL", "RUNTIME_ERROR"]
    bad = ts.traces[1].evaluation.correctness
    assert math.isnan(bad.max_relative_error) and bad.max_absolute_error == math.inf
    assert list(ts.definitions["rmsnorm_h64"].inputs) == ["hidden_states", "weight"]  # calling order kept
    assert ts.blob_files() == [BLOB]


def test_export_reproduces_the_folder(tmp_path):
    src = write_trace_set(tmp_path / "src")
    ts = TraceSet.load(src)
    ts.save(tmp_path / "out")
    before, after = read_tree(src), read_tree(tmp_path / "out")
    assert sorted(before) == sorted(after)
    for rel in before:
        assert before[rel] == after[rel], rel
    # the parts our structs do not model survived through the raw JSON
    d = after["definitions/rmsnorm/rmsnorm_h64.json"]
    assert d["future_field"] == {"added": "by a newer FlashInfer-Bench"} and d["constraints"] == []
    cuda = after["solutions/gpt-x/rmsnorm/rmsnorm_h64/rmsnorm_h64_cuda_v2.json"]
    assert cuda["spec"]["build_commands"] == ["nvcc ..."]
    trace = after["traces/baseline/rmsnorm/rmsnorm_h64.jsonl"][1]["evaluation"]["correctness"]
    assert trace["max_relative_error"] == "NaN" and trace["max_absolute_error"] == "Infinity"
    assert list(d["inputs"]) == ["hidden_states", "weight"]
    # and a second round trip is a fixed point
    again = TraceSet.load(tmp_path / "out")
    again.save(tmp_path / "out2")
    assert read_tree(tmp_path / "out2") == after
    assert again.definitions == ts.definitions and again.solutions == ts.solutions
