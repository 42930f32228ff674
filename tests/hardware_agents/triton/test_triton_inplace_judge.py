"""The judge that compares in place (`device_judge.py`), the Triton agent's judging path in the
interpreter: it owns the kernel's buffers (a region the sandboxed child maps), reads every
case's outputs, guards and inputs itself while the child is held stopped, reads the timing
rounds' outputs at the secret positions itself (the child is never told them), and keeps
the problem's references on its device for the problem's life. Real agent, real sandboxed
children, the Triton interpreter; `device_judge=False` is the old path (outputs in files,
compared on the host), kept as the control: both must give the same verdict in the same
words."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from testdirs import ADVERSARIAL
from triton_helpers import edited, solution

import suites
from accelopt.problem import Problem, Solution
from accelopt.profile import Profile
from hardware_agents.pipeline.stages import Stages
from hardware_agents.triton import H100Agent, device_judge, stages
from hardware_agents.triton.stages import TritonStages

sys.path.insert(0, str(ADVERSARIAL))
from corpus import load

TIMING = {"interpreter_timing": True, "warmup": 1, "reps": 3, "trials": 2, "timeout_s": 120.0}
RMSNORM = "triton/rmsnorm_h4096"
VALUE_RETURNING = """
import torch
import triton
import triton.language as tl


@triton.jit
def _kernel(x_ptr, w_ptr, out_ptr, hidden, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + row * hidden + offs).to(tl.float32)
    w = tl.load(w_ptr + offs).to(tl.float32)
    y = x * tl.rsqrt(tl.sum(x * x, axis=0) / hidden + 1e-6) * w
    tl.store(out_ptr + row * hidden + offs, y.to(out_ptr.dtype.element_ty))


def run(hidden_states, weight):
    out = torch.empty(hidden_states.shape, dtype=OUT_DTYPE)
    _kernel[(hidden_states.shape[0],)](hidden_states, weight, out, hidden_states.shape[1], BLOCK=4096)
    return RESULT
"""


class Watching(H100Agent):
    """The agent, keeping what its stages saw of each profile: the child's final result, the
    rounds the judge read from its region and whether it judged in place."""

    seen: list[dict[str, Any]]

    def stages(
        self, problem: Problem, solution: Solution, seeds: tuple[int, ...], timeout_s: float, measure: bool
    ) -> Stages:
        seen = self.seen

        class Keeping(TritonStages):
            def finish(self, prof: Profile) -> Profile:
                judge = self.judge
                seen.append(
                    {
                        "res": self.res,
                        "round_reads": sorted(judge.rounds.round_reads) if judge is not None else [],
                        "inplace": self.inplace is not None,
                    }
                )
                return super().finish(prof)

        return Keeping(self, problem, solution, seeds, timeout_s, measure)


@pytest.fixture(scope="module")
def agents(triton_cache: Path) -> Iterator[dict[bool, Watching]]:
    made = {
        on: Watching(mode="interpreter", cache_dir=triton_cache, device_judge=on, **TIMING)
        for on in (True, False)
    }
    for a in made.values():
        a.seen = []
    yield made
    for a in made.values():
        a.close()


def test_the_interpreter_judges_in_place_by_default(triton_cache: Path) -> None:
    agent = H100Agent(mode="interpreter", cache_dir=triton_cache)
    try:
        assert agent.device_judge
    finally:
        agent.close()


def test_the_judge_reads_the_rounds_itself_and_never_hands_over_the_positions(
    agents: dict[bool, Watching], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Timed, in place: no output file, no sampled value and no checks file; every round read
    from the judge's region at its stop. The files path, the control, hands all of them over."""
    handed: list[str] = []
    real = stages.save_readable

    def recording(obj: object, path: Path) -> None:
        handed.append(Path(path).name)
        real(obj, path)

    monkeypatch.setattr(stages, "save_readable", recording)
    p = suites.get_problem(RMSNORM)
    for on in (True, False):
        handed.clear()
        agents[on].seen.clear()
        prof = agents[on].profile(p, p.baseline)
        assert prof.status == "passed", prof.log
        first = agents[on].seen[0]  # the profile's own child (the boundary child is untimed)
        res = first["res"]
        assert first["inplace"] is on
        checks = [h for h in handed if h.startswith("checks-")]
        if on:
            assert not checks and not res.timed_samples and not res.timed_full
            assert all(not r.output_file for r in res.cases)
            assert first["round_reads"] == list(range(len(res.timing))) and res.timing
        else:
            assert len(checks) == len(res.timing) and res.timed_samples and res.timed_full
            assert first["round_reads"] == []


@pytest.mark.parametrize(
    "what",
    ["values", "unwritten_row", "value_dtype", "value_shape"],
)
def test_both_paths_give_the_same_verdict_in_the_same_words(agents: dict[bool, Watching], what: str) -> None:
    p = suites.get_problem(RMSNORM)
    if what == "values":
        sol = solution(p, edited(p, "(x * inv_rms * w)", "(x * inv_rms * w * 1.05)"))
    elif what == "unwritten_row":
        sol = solution(
            p, edited(p, "_rmsnorm_kernel[(batch_size,)]", "_rmsnorm_kernel[(max(batch_size - 1, 1),)]")
        )
    else:
        result = "out" if what == "value_dtype" else "out.reshape(-1)"
        dtype = "torch.float32" if what == "value_dtype" else "torch.bfloat16"
        sol = solution(p, VALUE_RETURNING.replace("OUT_DTYPE", dtype).replace("RESULT", result), dps=False)
    profs = {on: agents[on].profile(p, sol, seeds=(0,), measure=False) for on in (True, False)}
    assert profs[True].status == profs[False].status == "incorrect", profs[True].log
    notes = {
        on: [(c.case, c.passed, c.note, c.rel_l2, c.max_abs_err) for c in pr.correctness]
        for on, pr in profs.items()
    }
    assert notes[True] == notes[False]
    assert any(not c[1] for c in notes[True])


def test_the_references_stay_on_the_judges_device_for_the_problems_life(agents: dict[bool, Watching]) -> None:
    """Built at the problem's first in-place profile, then the same object for every later one."""
    p = suites.get_problem(RMSNORM)
    built: list[object] = []
    real = device_judge.JudgeData.__init__

    def counting(self: device_judge.JudgeData, *a: Any, **k: Any) -> None:
        built.append(self)
        real(self, *a, **k)

    mp = pytest.MonkeyPatch()
    mp.setattr(device_judge.JudgeData, "__init__", counting)
    try:
        for _ in range(2):
            assert agents[True].profile(p, p.baseline, seeds=(0,), measure=False).status == "unmeasured"
    finally:
        mp.undo()
    assert len(built) <= 1  # none where an earlier test of this module built it already


HACKS = {h.name: h for h in load("triton")}


@pytest.mark.parametrize("name", ["patch_harness_checks", "fix_sampled_positions"])
def test_what_the_files_path_missed(agents: dict[bool, Watching], name: str) -> None:
    """Two corpus files the judge in place refuses, run through the old path: a harness whose
    own checks were patched reports nothing (passed), and a kernel told the secret positions
    fixes exactly those (not refused for its values)."""
    hack = HACKS[name]
    p = suites.get_problem(hack.problem)
    inplace = agents[True].profile(p, solution(p, hack.source, name=name))
    files = agents[False].profile(p, solution(p, hack.source, name=name))
    assert hack.accepts(
        inplace.status, inplace.log + " ".join(c.note for c in inplace.correctness), on_gpu=False
    )
    assert files.status in ("passed", "timing_mismatch"), files.log
