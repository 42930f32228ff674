"""Paged and ragged operators are checked on what makes them paged and ragged.

A published folder holds one production workload whose index blobs are missing; imported with
`--synthesize-indices`, the problem gets check workloads with several sequences
(`suites.flashinfer.ragged`), and the synthesized indices (`hardware_agents.index_inputs`)
give them different lengths with one of length 1, both edges of the page size, and for a
causal operator at least as many keys as queries in every sequence. An honest paged causal
prefill kernel is correct there; its mutants (the first sequence only, the last page dropped,
the causal mask off by one, one head only) are each caught, although a single-sequence check
(what the derived checks were before) passes the first of them."""

from __future__ import annotations

from pathlib import Path

import flashinfer_bench as fib
import msgspec
import numpy as np
import pytest
import ragged_fixture as rf
from flashinfer_bench.data import save_json_file
from triton_helpers import failing

from accelopt.problem import Workload
from hardware_agents.index_inputs import IndexLayout, synthesize
from suites.flashinfer import FlashInferImportError, TraceSet, problems_from
from suites.flashinfer.ragged import MIN_SEQUENCES


def _write(root: Path) -> Path:
    d = rf.definition()
    save_json_file(d, root / "definitions" / d.op_type / f"{d.name}.json")
    sol = fib.Solution(
        name="honest",
        definition=d.name,
        author="someone",
        spec=fib.BuildSpec(language="triton", target_hardware=["NVIDIA_H100"], entry_point="main.py::run"),
        sources=[fib.SourceFile(path="main.py", content=rf.KERNEL)],
    )
    save_json_file(sol, root / "solutions" / d.op_type / d.name / "honest.json")
    trace = fib.Trace(definition=d.name, workload=rf.production_workload())
    save_json_file(trace, root / "workloads" / d.op_type / f"{d.name}_prod.json")  # one pretty .json
    return root


@pytest.fixture(scope="module")
def problem(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    ts = TraceSet.load(_write(tmp_path_factory.mktemp("ragged")))
    (p,) = problems_from(ts, synthesize_indices=True)
    return p, ts.notes


def test_checks_cover_several_sequences(problem):
    p, notes = problem
    assert any("derived to cover its batch and ragged structure" in n for n in notes), notes
    seqs = [w.axes["len_indptr"] - 1 for w in p.check_workloads]
    assert seqs and all(n >= MIN_SEQUENCES for n in seqs), seqs
    assert all(w.axes["len_indptr"] == w.axes["batch_size"] + 1 for w in p.check_workloads)


@pytest.mark.parametrize("seed", [0, 1, 2, 21, 42])
def test_synthesized_indices_respect_causality_and_pages(problem, seed):
    p, _ = problem
    d = p.definition
    for w in p.check_workloads:
        axes = p.axis_values() | w.axes
        idx = synthesize(d, axes, seed)
        q = np.diff(idx["qo_indptr"])
        pages = np.diff(idx["kv_indptr"])
        last = idx["kv_last_page_len"]
        tokens = (pages - 1) * 4 + last
        assert q.sum() == axes["total_q"] and pages.sum() == axes["num_kv_indices"]
        assert (tokens >= q).all(), (q, tokens)  # causal: no query without a key
        assert 1 in set(q.tolist()) and len(set(q.tolist())) > 1  # a length-1 sequence, different lengths
        assert {1, 4} <= set(last.tolist()) and ((last >= 1) & (last <= 4)).all()  # both page edges
        ids = idx["kv_indices"]
        assert ids.min() >= 0 and ids.max() < axes["num_pages"] and len(set(ids.tolist())) == len(ids)


def test_a_causal_total_no_keys_can_hold_is_an_error(problem):
    d = problem[0].definition
    assert IndexLayout.of(d).causal
    axes = {
        "batch_size": 3,
        "len_indptr": 4,
        "total_q": 50,
        "num_kv_indices": 3,
        "num_pages": 8,
        "page_size": 4,
    }
    with pytest.raises(ValueError, match=r"causal.*total_q=50 queries cannot fit"):
        synthesize(d, axes, 0)


def test_the_honest_kernel_is_correct(problem, interp_agent):
    p, _ = problem
    prof = interp_agent.profile(p, p.baseline, seeds=(0,))
    assert prof.status == "unmeasured", prof.log
    assert len(prof.correctness) == 1 + len(p.check_workloads) and all(c.passed for c in prof.correctness)


@pytest.mark.parametrize("which", list(rf.MUTANTS))
def test_every_mutant_is_caught(problem, interp_agent, which):
    p, _ = problem
    bad = msgspec.structs.replace(
        p.baseline, name=which.replace(" ", "_"), sources=[_source(p, rf.mutant(which))]
    )
    prof = interp_agent.profile(p, bad, seeds=(0,))
    assert prof.status == "incorrect", (which, prof.log)
    assert failing(prof), prof.log


def test_a_single_sequence_check_misses_the_first_sequence_mutant(problem, interp_agent):
    """Why the checks need several sequences: at one sequence (what derived checks held before)
    a kernel that handles only the first sequence agrees with the reference."""
    p, _ = problem
    one = Workload(
        uuid="one-seq",
        axes={"batch_size": 1, "len_indptr": 2, "total_q": 6, "num_kv_indices": 3, "num_pages": 5},
        inputs={"sm_scale": p.workload.inputs["sm_scale"]},
    )
    single = msgspec.structs.replace(p, check_workloads=[one])
    bad = msgspec.structs.replace(p.baseline, sources=[_source(p, rf.mutant("first sequence only"))])
    assert interp_agent.profile(single, bad, seeds=(0,)).status == "unmeasured"


def test_ragged_queries_get_no_boundary_workloads(problem):
    """A paged prefill's interpretation grows as queries times keys: 129 queries of this
    kernel ran past the 90 s timeout, so the interpreter adds no boundary workloads
    (`hardware_agents/triton/boundaries.py`); the checks above cover its sequences."""
    from hardware_agents.triton.stages import plan_boundary_cases

    p, _ = problem
    assert len(p.check_workloads) >= 2 and plan_boundary_cases(p, (0,)) == []


def test_without_the_option_the_missing_index_blobs_are_an_error(tmp_path):
    ts = TraceSet.load(_write(tmp_path))
    with pytest.raises(FlashInferImportError, match="--synthesize-indices"):
        problems_from(ts)


def _source(p, content: str):  # type: ignore[no-untyped-def]
    return msgspec.structs.replace(p.baseline.sources[0], content=content)
