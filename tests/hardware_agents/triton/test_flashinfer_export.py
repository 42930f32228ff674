"""What we export loads in the real FlashInfer-Bench (`TraceSet.from_path`, i.e. all of its
pydantic validators: which statuses carry correctness/performance, non-negative and non-empty
fields), and means there what it means in FlashInfer-Bench: an unmeasured profile is a trace
with no evaluation (no fake latency in its summary), `max_relative_error` is its per-element
maximum, and a paged-decode workload carries its page indices as blobs, so FlashInfer-Bench's
own input generation gives a non-trivial reference that our baseline matches."""

from __future__ import annotations

import importlib.util
import json
import math

import flashinfer_bench as fib
import msgspec
import pytest
import torch
from fib_helpers import load_with_flashinfer
from flashinfer_bench.bench.config import BenchmarkConfig
from flashinfer_bench.bench.evaluators.utils import allocate_outputs
from flashinfer_bench.bench.utils import compute_error_stats, gen_inputs, load_safetensors

import suites
from accelopt.problem import BuildSpec, SourceFile
from accelopt.profile import LatencyStats, Profile, SeedCheck
from hardware_agents.pipeline import compare
from suites.flashinfer import TraceSet, export_problems, problems_from, trace_set_from_problems
from suites.flashinfer.traces import to_trace
from suites.flashinfer.traceset import to_fib


def test_triton_suite_exports_loadable(tmp_path):
    problems = suites.load_suite("triton")
    ts = export_problems(problems, tmp_path / "fib")
    loaded = load_with_flashinfer(tmp_path / "fib")
    assert set(loaded.definitions) == {p.name for p in problems}
    assert sum(map(len, loaded.workloads.values())) == 3 * len(
        problems
    )  # production + 2 small workloads each
    sols = [s for ss in loaded.solutions.values() for s in ss]
    assert {s.spec.language.value for s in sols} == {"triton"}
    assert all(s.spec.entry_point == "main.py::run" and s.author == "baseline" for s in sols)
    raw = (
        tmp_path / "fib" / "solutions/baseline/rmsnorm/rmsnorm_h4096/rmsnorm_h4096_baseline.json"
    ).read_text()
    assert '"destination_passing_style": true' in raw  # explicit, not left to FlashInfer-Bench's default
    d = (tmp_path / "fib" / "definitions/rmsnorm/rmsnorm_h4096.json").read_text()
    assert '"x_roofline"' in d and '"x_tolerance"' in d  # our extensions ride along as x_ fields
    assert not ts.notes


def test_c_and_nki_solutions_go_where_flashinfer_does_not_look(tmp_path):
    problems = suites.load_suite("cpu")[:3]
    ts = export_problems(problems, tmp_path / "fib")
    loaded = load_with_flashinfer(tmp_path / "fib")
    assert len(loaded.definitions) == 3 and not loaded.solutions
    assert len(list((tmp_path / "fib" / "x_solutions").rglob("*.json"))) == 3
    assert len(ts.notes) == 3 and all(
        "language 'c' has no FlashInfer-Bench equivalent" in n for n in ts.notes
    )
    p = problems[0]
    nki = msgspec.structs.replace(
        p.baseline,
        name="x_nki",
        spec=BuildSpec(language="nki", target_hardware=["trn2"], entry_point="kernel.py::kernel"),
        sources=[SourceFile(path="kernel.py", content="def kernel(): pass\n")],
    )
    ts2 = TraceSet()
    assert not ts2.add_solution(nki) and "language 'nki'" in ts2.notes[0] and "x_nki" in ts2.solutions


CHECKS = [
    SeedCheck(case="seed0", passed=True, rel_l2=0.003, max_abs_err=0.05, max_rel_err=0.02),
    SeedCheck(case="seed21", passed=True, rel_l2=0.004, max_abs_err=0.03, max_rel_err=0.07),
]
LAT = LatencyStats(samples_ms=[0.05, 0.06], median_ms=0.055, min_ms=0.05, max_ms=0.06, spread=0.1)
PROFILES = [
    Profile(
        status="passed", device="h100", correctness=CHECKS, peak_fraction=0.71, bound="memory", latency=LAT
    ),
    Profile(status="unmeasured", device="h100", correctness=CHECKS, log="correct; not timed"),
    Profile(
        status="incorrect",
        device="h100",
        correctness=[
            SeedCheck(case="seed0", passed=False, note="o: 3 non-finite values where the reference is finite")
        ],
    ),
    Profile(
        status="incorrect",
        device="h100",
        correctness=[SeedCheck(case="seed0", passed=False, rel_l2=0.4, max_abs_err=2.0, max_rel_err=9.5)],
    ),
    Profile(
        status="incorrect",
        device="h100",
        correctness=[
            SeedCheck(case="seed0", passed=False, note="output output has shape [2], the definition says [3]")
        ],
    ),
    Profile(status="compile_error", device="h100", log="SyntaxError"),
    Profile(status="timeout", device="h100", log="killed"),
    # right values from a torch fallback: the reason, not the values, decides
    Profile(
        status="incorrect",
        reason="no_triton_launch",
        device="h100",
        correctness=CHECKS,
        log="took the torch path",
    ),
    Profile(status="runtime_error", device="h100", log=""),
]


def test_traces_of_every_status_pass_flashinfers_validators(tmp_path, triton_suite):
    p = triton_suite["rmsnorm_h4096"]
    sol = msgspec.structs.replace(p.baseline, name="rmsnorm_candidate", author="accelopt")
    traces = [
        to_trace(p, sol, prof, hardware="NVIDIA H100 80GB HBM3", timestamp="2026-05-01T12:00:00")
        for prof in PROFILES
    ]
    for t in traces:  # FlashInfer-Bench's own validators, record by record
        fib.Trace.model_validate_json(json.dumps(to_fib(t)))
    ts = trace_set_from_problems([p], tmp_path / "fib", traces=[(sol, t) for t in traces])
    ts.save(tmp_path / "fib")
    loaded = load_with_flashinfer(tmp_path / "fib")  # and as a folder
    got = loaded.traces["rmsnorm_h4096"]
    assert [t.evaluation.status.value if t.evaluation else None for t in got] == [
        "PASSED",
        None,
        "INCORRECT_NUMERICAL",
        "INCORRECT_NUMERICAL",
        "RUNTIME_ERROR",
        "COMPILE_ERROR",
        "TIMEOUT",
        "RUNTIME_ERROR",
        "RUNTIME_ERROR",
    ]
    passed = got[0].evaluation
    assert passed.performance.latency_ms == 0.055
    assert passed.correctness.max_relative_error == 0.07  # FlashInfer-Bench's per-element metric
    assert passed.correctness.extra["x_rel_l2"] == 0.004  # ours, under an x_ key
    assert (
        got[1].solution == "rmsnorm_candidate" and got[1].evaluation is None
    )  # not evaluated: no fake latency
    summary = loaded.summary()
    assert summary["passed"] == 1 and summary["min_latency_ms"] == 0.055 and summary["total"] == len(PROFILES)
    assert math.isinf(got[2].evaluation.correctness.max_relative_error)  # NaN outputs
    assert got[3].evaluation.correctness.max_relative_error == 9.5
    assert "launched no Triton kernel" in got[7].evaluation.log
    # and back: ours keeps the untimed evaluation
    again = TraceSet.load(tmp_path / "fib")
    assert (
        again.traces[1].x_untimed is not None
        and again.traces[1].x_untimed.correctness.max_relative_error == 0.07
    )
    assert again.traces == traces


def test_max_relative_error_is_flashinfers_metric():
    gen = torch.Generator().manual_seed(3)
    ref = torch.randn(257, 33, generator=gen, dtype=torch.float64)
    got = (ref + 1e-3 * torch.randn(257, 33, generator=gen, dtype=torch.float64)).to(torch.bfloat16)
    _, fib_rel, _, _ = compute_error_stats(got, ref.to(torch.bfloat16), BenchmarkConfig())
    ours = compare.max_relative_error(
        got.to(torch.float64).numpy(), ref.to(torch.bfloat16).to(torch.float64).numpy()
    )
    assert ours == pytest.approx(fib_rel, rel=1e-5)


def test_paged_decode_exports_its_page_indices(tmp_path, triton_suite):
    p = triton_suite["gqa_paged_decode_h32_kv8_d128_ps1"]
    export_problems([p], tmp_path / "fib")
    loaded = load_with_flashinfer(tmp_path / "fib")
    d = loaded.definitions[p.name]
    small = min((t.workload for t in loaded.workloads[p.name]), key=lambda w: w.axes["batch_size"])
    assert {n: i.type for n, i in small.inputs.items()} == {
        "sm_scale": "scalar",
        "kv_indptr": "safetensors",
        "kv_indices": "safetensors",
    }
    inputs = gen_inputs(
        d, small, "cpu", load_safetensors(d, small, tmp_path / "fib")
    )  # FlashInfer-Bench's own
    indptr = inputs[list(d.inputs).index("kv_indptr")]
    assert (
        indptr[0] == 0
        and indptr[-1] == small.axes["num_kv_indices"]
        and bool((indptr[1:] >= indptr[:-1]).all())
    )
    ns: dict = {}
    exec(d.reference, ns)
    ref = ns["run"](*inputs)
    assert all(float(r.float().abs().sum()) > 0 for r in ref)  # random indices gave zeros
    # the baseline (Triton interpreter, in this process) matches on FlashInfer-Bench's inputs
    path = tmp_path / "baseline.py"
    path.write_text(p.baseline.sources[0].content)
    spec = importlib.util.spec_from_file_location("gqa_baseline", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    outs = allocate_outputs(d, inputs, "cpu")
    mod.run(*inputs, *outs)
    for o, r in zip(outs, ref, strict=True):
        _, _, exceeds, _ = compute_error_stats(o, r, BenchmarkConfig())
        assert not exceeds
    # and it re-imports as it was (ours: indices synthesized per seed)
    assert problems_from(TraceSet.load(tmp_path / "fib"))[0] == p
