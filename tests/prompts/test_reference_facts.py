"""Our NKI planner and executor prompts against the AccelOpt reference implementation's,
for the 14 NKIBench problems (an NKIBench-format folder written by
tests/hardware_agents/neuron/nkibench_fixture.py and imported with `import_nkibench`): every fact the
reference's prompt gives the model is in ours. The reference's prompt (planner and executor
base prompts + templates) holds: the problem module (`get_inputs`, `forward` and the NKI
input/output transforms), the baseline kernel, the profile with its field glossary, the NKI
API notes (partition dimension, PSUM/SBUF/partition limits, nc_matmul with its parameters,
nc_transpose), and for the executor the loop-dependency, indexing, scope and
variable-access rules, the plan and the correctness check. Facts are checked as the
phrases our prompts use for them."""

from __future__ import annotations

import sys

import pytest
from testdirs import NEURON

sys.path.insert(0, str(NEURON))

from nkibench_fixture import CATALOG, write_nkibench

import suites
from accelopt.profile import LatencyStats, Profile
from actors.llm.role_table import render
from suites.nkibench import import_nkibench

# the reference planner's profile glossary; ours names its latency latency_ms
REFERENCE_PROFILE_FIELDS = (
    "hbm_read_bytes",
    "hbm_write_bytes",
    "psum_read_bytes",
    "psum_write_bytes",
    "sbuf_read_bytes",
    "sbuf_write_bytes",
    "spill_reload_bytes",
    "spill_save_bytes",
    "hardware_flops",
    "transpose_flops",
    "peak_flops_bandwidth_ratio",
    "mm_arithmetic_intensity",
    "hfu_estimated_percent",
    "scalar_engine_active_time_percent",
    "vector_engine_active_time_percent",
    "gpsimd_engine_active_time_percent",
)

# the reference's NKI API notes (planner and executor), as our primer states them
API_FACTS = (
    "partition dimension",
    "nl.par_dim",
    "free dimensions, stored sequentially",
    "at most 128",
    "at most 512 float32 per partition",
    "192 KiB",
    "nisa.nc_matmul(stationary, moving)",
    "stationary.T @ moving",
    "128x128 stationary with a 128x512 moving tile",
    "nisa.nc_transpose(x)` costs as much as `nisa.nc_matmul(x, identity, is_moving_onezero=True, is_transpose=True)",
)

# the reference executor's rules
EXECUTOR_FACTS = (
    "nisa.nc_matmul(stationary, moving, is_stationary_onezero=False, is_moving_onezero=False, mask=None, "
    "is_transpose=False)",
    "is_stationary_onezero / is_moving_onezero",
    "is_transpose",
    "mask: a compile-time",
    "must write to distinct locations",
    "nl.sequential_range",
    "Basic indexing uses integers, slices",
    "Advanced indexing uses index grids",
    "Never mix basic indexing",
    "cannot be used after the block",
    "shadowing",
    "no slices whose length depends on a loop variable",
    "shape elements must be Python integers",
    "cannot be assigned into an HBM tensor",
    "nl.store(",
    "Only use NKI APIs that exist",
    "Don't use lower precision",
)


@pytest.fixture(scope="module")
def nkibench(tmp_path_factory: pytest.TempPathFactory):
    root = tmp_path_factory.mktemp("nkibench-14")
    written = write_nkibench(root / "src", CATALOG.values())
    report = import_nkibench(root / "src", root / "suite", name="nkibench")
    return {p.name: p for p in suites.load_suite(report.out)}, written


def _profile() -> Profile:
    counters = {name: float(i + 1) * 1000 for i, name in enumerate(REFERENCE_PROFILE_FIELDS)}
    return Profile(
        status="passed",
        device="trn1",
        peak_fraction=0.31,
        bound="memory",
        t_peak_ms=0.6,
        latency=LatencyStats(samples_ms=[2.0], median_ms=2.0, min_ms=2.0, max_ms=2.0, spread=0.0),
        counters=counters,
    )


def _text(messages) -> str:
    return "\n".join(m.content for m in messages)


def test_all_fourteen_problems_are_imported(nkibench):
    problems, _ = nkibench
    assert sorted(problems) == sorted(CATALOG)


@pytest.mark.parametrize("name", sorted(CATALOG))
def test_every_fact_of_the_reference_prompts_is_in_ours(nkibench, name):
    problems, written = nkibench
    problem = problems[name]
    kernel = problem.baseline.entry_file().content
    planner = _text(
        render(
            "planner",
            "nki",
            problem=problem,
            source=kernel,
            profile=_profile(),
            insights=[],
            device="trn1",
            seed=0,
            request_id="r",
        )
    )
    executor = _text(
        render(
            "executor",
            "nki",
            problem=problem,
            source=kernel,
            device="trn1",
            plan="Tile the free dimension by 512.",
        )
    )
    reference = written.references[name].read_text()
    for text in (planner, executor):
        # the problem code: every line of the reference module (inputs, forward, transforms)
        missing = [ln for ln in reference.splitlines() if ln.strip() and ln.strip() not in text]
        assert not missing, f"{name}: reference lines missing: {missing[:5]}"
        # the baseline kernel, whole
        assert kernel.strip() in text
        for fact in API_FACTS:
            assert fact in text, f"{name}: {fact}"
        assert "## Correctness bar" in text  # the reference's allclose check, as our stricter bar
    profile_section = planner.split("# Profile\n")[-1]
    for field in (*REFERENCE_PROFILE_FIELDS, "latency_ms"):
        assert field in planner.split("# Profile terminology")[1], f"glossary: {field}"
        assert field in profile_section, f"profile: {field}"
    for fact in EXECUTOR_FACTS:
        assert fact in executor, f"{name}: {fact}"
    assert "Tile the free dimension by 512." in executor
