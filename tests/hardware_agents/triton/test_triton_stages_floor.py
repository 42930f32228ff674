"""A timed profile whose adversarial case needs the float32 floor (`test_triton_fp32_floor.py`'s
tie attention): the floor's reference child cannot run while the harness child is held
stopped before timing round 0 (on a GPU it needs the device that child holds), so that case is
judged again once the child has ended (`triton/stages.py`). The honest kernel still passes
(with the floor, timed); the bf16-scores kernel is still `incorrect`, after its rounds. Real
interpreter, real sandbox, timed on the interpreter's clock."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from test_triton_fp32_floor import BF16_SCORES, _kernel, tie_attention
from triton_helpers import failing

from accelopt.problem import Problem
from hardware_agents.pipeline.stages import STAGES, stages_of
from hardware_agents.triton import H100Agent


@pytest.fixture(scope="module")
def timed_agent(triton_cache: Path) -> Iterator[H100Agent]:
    agent = H100Agent(
        mode="interpreter",
        cache_dir=triton_cache,
        timeout_s=120.0,
        interpreter_timing=True,
        warmup=1,
        reps=3,
        trials=2,
    )
    yield agent
    agent.close()


@pytest.fixture(scope="module")
def problem() -> Problem:
    return tie_attention()


def test_a_case_that_needs_the_floor_is_judged_after_the_rounds_and_passes(timed_agent, problem) -> None:
    prof = timed_agent.profile(problem, problem.baseline)
    assert prof.status == "passed", prof.log
    assert prof.counters["fp32_floor_cases"] == 1.0, prof.counters
    assert prof.counters["correctness_after_rounds"] == 1.0  # deferred, not judged at the stop
    assert prof.counters["phase_timing_rounds_s"] > 0
    assert [r.name for r in stages_of(prof.counters)] == list(STAGES)
    assert "large passed only with the tolerance widened" in prof.log, prof.log


def test_a_kernel_the_floor_does_not_excuse_is_incorrect_after_its_rounds(timed_agent, problem) -> None:
    prof = timed_agent.profile(problem, _kernel(problem, BF16_SCORES, "bf16_scores_timed"))
    assert prof.status == "incorrect", prof.log
    assert failing(prof) == ["large"]
    assert "(with 4x float32's own error)" in prof.log, prof.log
    # deferred: the rounds ran, the verdict came once the child had ended
    assert prof.counters["correctness_after_rounds"] == 1.0
    assert prof.counters["phase_timing_rounds_s"] > 0
    assert [r.name for r in stages_of(prof.counters)][-1] == "timing_rounds"
