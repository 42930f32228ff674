"""What we export loads with FlashInfer-Bench's data model (its field names, enums and
validators, unknown `x_` fields ignored): the Triton and CPU suites' definitions and
workloads, Triton baselines (C and NKI solutions are skipped with a note), and traces made
from our profiles, including failed and unmeasured ones."""

from __future__ import annotations

import math

import msgspec
from fib_fixture import load_like_flashinfer, write_trace_set

import suites
from accelopt.problem import BuildSpec, Solution, SourceFile
from accelopt.profile import LatencyStats, Profile, SeedCheck
from hardware_agents.base import to_trace
from suites.flashinfer import TraceSet, export_problems, problems_from, trace_set_from_problems


def test_triton_suite_exports_loadable(tmp_path):
    problems = suites.load_suite("triton")
    ts = export_problems(problems, tmp_path / "fib")
    loaded = load_like_flashinfer(tmp_path / "fib")
    assert set(loaded["definitions"]) == {p.name for p in problems}
    assert len(loaded["workloads"]) == 3 * len(problems)  # production + 2 small workloads each
    assert {s.spec.language for s in loaded["solutions"].values()} == {"triton"}
    for s in loaded["solutions"].values():
        assert s.spec.entry_point == "main.py::run" and s.author == "baseline"
    raw = (tmp_path / "fib" / "solutions/baseline/rmsnorm/rmsnorm_h4096/rmsnorm_h4096_baseline.json").read_text()
    assert '"destination_passing_style": true' in raw  # explicit, not left to FlashInfer-Bench's default
    d = (tmp_path / "fib" / "definitions/rmsnorm/rmsnorm_h4096.json").read_text()
    assert '"x_roofline"' in d and '"x_tolerance"' in d  # our extensions ride along as x_ fields
    assert not ts.notes


def test_c_and_nki_solutions_are_skipped_with_a_note(tmp_path):
    problems = suites.load_suite("cpu")[:3]
    ts = export_problems(problems, tmp_path / "fib")
    loaded = load_like_flashinfer(tmp_path / "fib")
    assert len(loaded["definitions"]) == 3 and not loaded["solutions"]
    assert len(ts.notes) == 3 and all("language 'c' has no FlashInfer-Bench equivalent" in n for n in ts.notes)
    p = problems[0]
    nki = msgspec.structs.replace(p.baseline, name="x_nki", spec=BuildSpec(language="nki", target_hardware=["trn2"],
                                                                          entry_point="kernel.py::kernel"),
                                  sources=[SourceFile(path="kernel.py", content="def kernel(): pass\n")])
    ts2 = TraceSet()
    assert not ts2.add_solution(nki) and "language 'nki'" in ts2.notes[0]


def test_traces_of_profiles_are_loadable(tmp_path, triton_suite):
    p = triton_suite["rmsnorm_h4096"]
    sol = msgspec.structs.replace(p.baseline, name="rmsnorm_candidate", author="accelopt")
    checks = [SeedCheck(case="seed0", passed=True, rel_l2=0.003, max_abs_err=0.05)]
    profiles = [
        Profile(status="passed", device="h100", correctness=checks, pct_peak=0.71, bound="memory",
                latency=LatencyStats(samples_ms=[0.05, 0.06], median_ms=0.055, min_ms=0.05, max_ms=0.06, spread=0.1)),
        Profile(status="unmeasured", device="h100", correctness=checks, log="correct; not timed"),
        Profile(status="incorrect", device="h100", correctness=[SeedCheck(case="large", passed=False, note="NaN")]),
        Profile(status="compile_error", device="h100", log="SyntaxError"),
        Profile(status="timeout", device="h100", log="killed"),
    ]
    pairs = [(sol, to_trace(p, sol, prof, hardware="NVIDIA H100 80GB HBM3", timestamp="2026-05-01T12:00:00"))
             for prof in profiles]
    ts = trace_set_from_problems([p], tmp_path / "fib", traces=pairs)
    ts.save(tmp_path / "fib")
    loaded = load_like_flashinfer(tmp_path / "fib")
    statuses = [t.evaluation.status for t in loaded["traces"]]
    assert statuses == ["PASSED", "PASSED", "INCORRECT_NUMERICAL", "COMPILE_ERROR", "TIMEOUT"]
    inc = loaded["traces"][2].evaluation.correctness
    assert math.isinf(inc.max_relative_error)  # written as "Infinity", read back by pydantic
    assert "Infinity" in (tmp_path / "fib" / "traces/accelopt/rmsnorm/rmsnorm_h4096.jsonl").read_text()
    assert loaded["traces"][0].evaluation.performance.latency_ms == 0.055
    assert set(loaded["solutions"]) == {"rmsnorm_h4096_baseline", "rmsnorm_candidate"}


def test_reimport_of_an_export_gives_the_same_problems(tmp_path):
    problems = suites.load_suite("triton")
    export_problems(problems, tmp_path / "fib")
    again = {p.name: p for p in problems_from(TraceSet.load(tmp_path / "fib"))}
    for p in problems:
        q = again[p.name]
        assert q.definition == p.definition and q.workload == p.workload and q.baseline == p.baseline
        assert sorted(w.uuid for w in q.check_workloads) == sorted(w.uuid for w in p.check_workloads)


def test_imported_folder_exports_loadable(tmp_path):
    ts = TraceSet.load(write_trace_set(tmp_path / "src"))
    problems = problems_from(ts)
    export_problems(problems, tmp_path / "fib")
    loaded = load_like_flashinfer(tmp_path / "fib")
    blob = next((tmp_path / "fib" / "blob").rglob("*.safetensors"))
    assert blob.stat().st_size > 0
    st = [w for w in loaded["workloads"] if any(i.type == "safetensors" for i in w.workload.inputs.values())]
    assert len(st) == 1 and not st[0].workload.inputs["hidden_states"].path.startswith("/")
    assert (tmp_path / "fib" / st[0].workload.inputs["hidden_states"].path).is_file()
    assert isinstance(problems[0].baseline, Solution)
