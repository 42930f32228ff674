"""What one profile asks of its harness child: the timing plan (the rounds, calls and checks
the data is drawn for, `timing_plan`) and the harness request (the cases and the timed
loop's spec, `harness_request`), from the agent's options (`RequestSettings`); and the
folders of ours each profile's timing rounds' inputs are handed over in (`RoundsFolders`).

    tplan = timing_plan(agent, problem, plan, like)        # None when the profile is not timed
    request = harness_request(agent, problem, solution, data, contents, seed, tplan, entry_path, symbol)
"""

from __future__ import annotations

import math
import os
import shutil
import tempfile
from pathlib import Path
from typing import Literal, Protocol

import torch

from accelopt.problem import Problem, Solution
from hardware_agents.pipeline.cases import PlannedCase
from hardware_agents.pipeline.device_spec import DeviceSpec
from hardware_agents.sandbox import default_base_dir, private_dir
from hardware_agents.triton.data import ProblemData, TimingPlan, input_metas, output_metas
from hardware_agents.triton.gpu import GpuInfo
from hardware_agents.triton.inputs import torch_dtype
from hardware_agents.triton.records import CaseSpec, HarnessRequest, TimerName, TimingSpec, round_file
from hardware_agents.triton.specs import l2_bytes

CAPTURE_BUDGET_S = 200e-6  # host time a call's graph capture may take in a round's set-up (GPU)
PER_ROUND = 2  # fresh base contents per timing round (every call derives its own content from one)


class RoundsFolders:
    """The agent's folder of timing rounds under `base_dir` (0711: each profile's folder in
    it has an unguessable name, and the children may read beneath it, never list it), made
    on first use and removed by `close`."""

    def __init__(self, base_dir: Path | None) -> None:
        self.base_dir = base_dir
        self._root: Path | None = None

    def root(self) -> Path:
        if self._root is None:
            self._root = private_dir(self.base_dir or default_base_dir(), "accelopt-triton-rounds-")
            os.chmod(self._root, 0o711)
        return self._root

    def new(self) -> Path:
        """A folder of ours for one profile's timing rounds' inputs: the child may read it, never
        write it (nothing the kernel plants there can redirect a write of ours)."""
        d = Path(tempfile.mkdtemp(prefix="r-", dir=self.root()))
        sub = d / Path(round_file(0)).parent
        sub.mkdir()
        for path in (d, sub):  # whatever the umask; the child opens the round files by name
            os.chmod(path, 0o711)
        return d

    def close(self) -> None:
        if self._root is not None:
            shutil.rmtree(self._root, ignore_errors=True)
            self._root = None


class RequestSettings(Protocol):
    """The agent's options a request is made from (`agent.TritonAgent`)."""

    mode: Literal["cuda", "interpreter"]
    gpu_infos: list[GpuInfo]
    timer: TimerName
    warmup: int
    reps: int
    trials: int
    extra_rounds: int
    calibration_rounds: int
    sample_positions: int
    full_checks: int
    keep_outputs_bytes: int | None
    timing_sets_bytes: int | None
    flush_bytes: int | None
    simulated_flush_s: float
    reference_budget_s: float
    rounds: RoundsFolders

    @property
    def graphs(self) -> bool: ...
    @property
    def spec(self) -> DeviceSpec: ...


def rotation_for(contents: int, set_bytes: int, l2: int, max_bytes: int = 4 << 30) -> int:
    """Buffer sets for the timed loop: more than the contents and not a multiple of their
    count (contents move between buffers), enough to exceed 2x L2 when memory allows."""
    r = max(contents + 1, math.ceil(2 * l2 / max(set_bytes, 1)))
    r = min(r, 64, max(contents + 1, max_bytes // max(set_bytes, 1)))
    while contents > 1 and r % contents == 0:
        r += 1
    return r


def sets_for(contents: int, calls: int, set_bytes: int, l2: int, budget: int) -> int:
    """Buffer sets for the timed loop: one per call where they fit in `budget` (stocked before
    the clock starts: nothing is restocked between calls, so a call's untimed work is the same
    for every kernel), else `rotation_for`'s."""
    if calls * set_bytes <= budget:
        return calls
    return rotation_for(contents, set_bytes, l2, max_bytes=budget)


def _gpu_quarter(agent: RequestSettings) -> int:
    """A quarter of the smallest GPU's memory (16 GiB where none says)."""
    return min((g.memory_bytes for g in agent.gpu_infos if g.memory_bytes), default=16 << 30) // 4


def keep_budget(agent: RequestSettings) -> int:
    """How many bytes of outputs a round may keep (every call's, for the secret checks)."""
    if agent.keep_outputs_bytes is not None:
        return agent.keep_outputs_bytes
    return _gpu_quarter(agent) if agent.mode == "cuda" else 1 << 30


def sets_budget(agent: RequestSettings) -> int:
    """How many bytes of input buffer sets a round may stock before its clock starts."""
    if agent.timing_sets_bytes is not None:
        return agent.timing_sets_bytes
    return _gpu_quarter(agent) if agent.mode == "cuda" else 1 << 30


def flush_bytes(agent: RequestSettings, l2: int) -> int:
    """The bytes the timed loop writes between calls to evict the cache."""
    if agent.flush_bytes is not None:
        return agent.flush_bytes
    # on CPU tensors (the interpreter) there is no GPU L2 to evict: a few MB of host cache
    return 8 << 20 if agent.mode == "interpreter" else max(256 << 20, 4 * l2)


def timing_plan(agent: RequestSettings, problem: Problem, plan: list[PlannedCase], like: str) -> TimingPlan:
    """The timing rounds' plan for the correctness case `like`'s workload."""
    pc = next(p for p in plan if p.name == like)
    out_bytes = sum(
        math.prod(o.shape or ()) * torch.empty((), dtype=torch_dtype(o.dtype)).element_size()
        for o in output_metas(problem.definition, pc.workload)
    )
    calls = agent.warmup + max(agent.reps, PER_ROUND)
    kept = calls * (2 if agent.graphs else 1)  # the graph replays' outputs are kept too
    return TimingPlan(
        like=like,
        rounds=agent.trials + agent.extra_rounds,
        per_round=PER_ROUND,
        calls=calls,
        samples=agent.sample_positions,
        full=agent.full_checks,
        positions_in_round=kept * out_bytes > keep_budget(agent),
        reference_budget_s=agent.reference_budget_s,
    )


def harness_request(
    agent: RequestSettings,
    problem: Problem,
    solution: Solution,
    data: ProblemData,
    contents: list[str],
    seed: int,
    tplan: TimingPlan | None,
    entry_path: str,
    symbol: str,
) -> HarnessRequest:
    """The harness child's request: every case of `data`, and with `tplan` the timed loop's
    spec (its rounds' inputs handed over in a fresh folder of `agent.rounds`)."""
    cases = [
        CaseSpec(name=c.name, inputs_file=c.inputs_file, scalars=c.scalars, outputs=c.outputs)
        for c in data.cases
    ]
    timing_spec = None
    if tplan is not None:
        cuda = agent.mode == "cuda"
        set_bytes = data.by_name[contents[0]].set_bytes
        l2 = l2_bytes(agent.spec)
        timing_spec = TimingSpec(
            like=contents[0],
            per_round=PER_ROUND,
            rotation=sets_for(PER_ROUND, tplan.calls, set_bytes, l2 if cuda else 0, sets_budget(agent)),
            timer="simulated" if agent.mode == "interpreter" else agent.timer,
            device_flush_s=agent.simulated_flush_s if agent.mode == "interpreter" else 0.0,
            warmup=agent.warmup,
            reps=tplan.calls - agent.warmup,
            trials=agent.trials,
            extra_rounds=agent.extra_rounds,
            graphs=agent.graphs,
            # a GPU host captures a Triton launch in tens of microseconds; the interpreter's
            # Python on a shared host takes ten times that
            capture_budget_s=CAPTURE_BUDGET_S if cuda else 10 * CAPTURE_BUDGET_S,
            flush_bytes=flush_bytes(agent, l2),
            calibration_rounds=agent.calibration_rounds,
            keep_outputs=not tplan.positions_in_round,
            inputs_dir=str(agent.rounds.new()),
        )
    first = data.cases[0].planned.workload
    return HarnessRequest(
        module_dir="",
        entry_file=entry_path,
        entry_symbol=symbol,
        destination_passing=solution.spec.destination_passing_style,
        inputs=input_metas(problem.definition, first),
        cases=cases,
        device="cuda" if agent.mode == "cuda" else "cpu",
        timing=timing_spec,
        seed=seed,
    )


__all__ = [
    "CAPTURE_BUDGET_S",
    "PER_ROUND",
    "RequestSettings",
    "RoundsFolders",
    "flush_bytes",
    "harness_request",
    "keep_budget",
    "rotation_for",
    "sets_budget",
    "sets_for",
    "timing_plan",
]
