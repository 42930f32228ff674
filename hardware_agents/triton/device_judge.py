"""The judge that compares in place: the Triton agent's judging path where the trusted side
owns the kernel's input and output buffers (`judge_buffers.py`) and the comparison runs as
torch operations where they are (`device_compare.py`).

Per problem, once (`judge_data`, kept with the problem's data for its life): every case's
inputs as the judge wrote them (its pristine copies) and its references, rounded to the
output dtype, with their norms (`RefNorm`, from the `RefStats` the problem's data computed
once), the timed calls' references checked in full, and on demand a case's float32 floor;
all on the judge's device, none of it in the region the kernel maps.

Per profile (`InPlace`): the region (every case's guarded inputs and outputs, one output
slot per kept timed call), the inputs written and everything else poisoned by the judge
before the child starts. While the child is held stopped (or after it has exited) the judge
reads, through its own mapping, each case's outputs (compared in place), its guards (against
the poison it wrote) and its inputs (bitwise against its pristine copy), and after each
timing round every call's outputs at the round's secret positions and the secret calls in
full: the child never learns the positions. The harness's own reports of mutated inputs,
written guards and sampled values are not asked for.

Where the old path stays: the interpreter's autotune sweep (its extra runs of one case, one
per config group, interpreter only) and timing rounds whose outputs are too large to keep
every call's (`TimingSpec.keep_outputs` false: the positions travel in the round file) still
hand outputs over in files, judged as before.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

import msgspec
import numpy as np
import torch

from accelopt.problem import Problem
from accelopt.profile import SeedCheck
from hardware_agents.triton.data import CaseData, ProblemData, TimedRound, tolerance_for
from hardware_agents.triton.device_compare import Floor, RefNorm, check_on_device
from hardware_agents.triton.inputs import TORCH_DTYPES, dtype_name
from hardware_agents.triton.judge_buffers import JudgeBuffers, SharedMemoryBuffers, layout
from hardware_agents.triton.records import (
    BufferHandle,
    BufferSlot,
    CaseRun,
    HarnessRequest,
    TensorMeta,
    case_slot,
    timed_slot,
)


class CaseRefs(msgspec.Struct, frozen=True):
    refs: dict[str, torch.Tensor]  # rounded to the output dtype (float64 for integer outputs)
    norms: dict[str, RefNorm]


def _refs_of(case: CaseData, device: torch.device) -> CaseRefs:
    refs, norms = {}, {}
    for meta in case.outputs:
        r = torch.from_numpy(np.ascontiguousarray(case.ref64[meta.name]))
        dt = TORCH_DTYPES[meta.dtype]
        refs[meta.name] = (r.to(dt) if dt.is_floating_point else r).to(device)
        st = case.stats[meta.name]
        norms[meta.name] = RefNorm(norm=st.norm, rms=st.rms, atol=st.atol, finite=st.finite)
    return CaseRefs(refs, norms)


class JudgeData:
    """One problem's data as the judge keeps it on its device (see the module doc)."""

    def __init__(self, data: ProblemData, device: torch.device) -> None:
        self.device = device
        self.inputs: dict[str, dict[str, torch.Tensor]] = {}
        self.refs: dict[str, CaseRefs] = {}
        for case in data.cases:
            loaded = torch.load(case.inputs_file, weights_only=True)  # the agent's own file
            self.inputs[case.name] = {n: t.to(device) for n, t in loaded.items()}
            self.refs[case.name] = _refs_of(case, device)
        for tr in data.rounds:
            for full in tr.full_cases.values():
                self.refs[full.name] = _refs_of(full, device)
        self._data = data
        self._floors: dict[str, dict[str, Floor]] = {}
        self._lock = threading.Lock()

    def floor(self, name: str) -> dict[str, Floor]:
        """Case `name`'s float32 floor (`ProblemData.floor`: measured by the reference child on
        first demand), on the device."""
        with self._lock:
            if name not in self._floors:
                got = self._data.floor(name)
                self._floors[name] = {
                    o: Floor(
                        rows=torch.from_numpy(np.asarray(f.rows, dtype=np.float32)).to(self.device),
                        rel_l2=f.rel_l2,
                    )
                    for o, f in got.items()
                }
            return self._floors[name]


def judge_data(data: ProblemData, device: torch.device) -> JudgeData:
    """The problem's `JudgeData` on `device`, built at its first profile, kept for its life."""
    return data.keep(f"judge-data:{device}", lambda: JudgeData(data, device))


class CaseRead(msgspec.Struct):
    """What the judge read of one case's buffers at one moment."""

    outputs: dict[str, torch.Tensor]
    mutated: list[str]  # inputs (with their guards) not as the judge wrote them
    overflow: list[str]  # outputs whose guards were written


class RoundRead(msgspec.Struct):
    """What the judge read of a timing round's kept outputs while the child was stopped."""

    samples: dict[str, np.ndarray]  # output -> [kept calls, positions] float64
    full: dict[int, SeedCheck]  # the secret calls checked in full


class InPlace:
    """One profile's region and the judge's reads and checks of it (see the module doc)."""

    def __init__(
        self,
        jd: JudgeData,
        data: ProblemData,
        request: HarnessRequest,
        make: Callable[[list[BufferSlot], int], JudgeBuffers] = SharedMemoryBuffers,
    ) -> None:
        self.jd, self.data = jd, data
        tensors: list[tuple[str, str, list[int], bool]] = []
        for case in data.cases:
            for n, x in jd.inputs[case.name].items():
                tensors.append((case_slot(case.name, "in", n), dtype_name(x.dtype), list(x.shape), True))
            for o in case.outputs:
                tensors.append((case_slot(case.name, "out", o.name), o.dtype, list(o.shape or []), True))
        spec = request.timing
        self.timed_calls = 0
        self.timed_outputs: list[TensorMeta] = []
        if spec is not None and spec.keep_outputs:
            self.timed_calls = spec.calls * (2 if spec.graphs else 1)
            self.timed_outputs = data.by_name[spec.like].outputs
            for t in range(self.timed_calls):
                for o in self.timed_outputs:
                    tensors.append((timed_slot(t, o.name), o.dtype, list(o.shape or []), False))
        slots, size = layout(tensors)
        self.buffers = make(slots, size)
        for case in data.cases:
            for n, x in jd.inputs[case.name].items():
                self.buffers.write(case_slot(case.name, "in", n), x)
            for o in case.outputs:
                self.buffers.poison(case_slot(case.name, "out", o.name))
        self.poison_timed()

    @property
    def handle(self) -> BufferHandle:
        return self.buffers.handle

    @property
    def pass_fds(self) -> tuple[int, ...]:
        return self.buffers.pass_fds

    def close(self) -> None:
        self.buffers.close()

    # --- correctness cases -------------------------------------------------------------------

    def read_case(self, name: str) -> CaseRead:
        """Case `name`'s outputs (views of the region: read them while the child cannot run),
        its inputs and guards checked against what the judge wrote."""
        case = self.data.by_name[name]
        mutated = [
            n
            for n, t in self.jd.inputs[name].items()
            if not self.buffers.unchanged(case_slot(name, "in", n), t)
        ]
        outputs = {o.name: self.buffers.view(case_slot(name, "out", o.name)) for o in case.outputs}
        overflow = [
            o.name for o in case.outputs if not self.buffers.guards_intact(case_slot(name, "out", o.name))
        ]
        return CaseRead(outputs=outputs, mutated=mutated, overflow=overflow)

    @staticmethod
    def returned_wrong(case: CaseData, run: CaseRun) -> str:
        """What a value-returning entry point returned that the definition does not have, as
        the harness saw it copying the values into the judge's slots (check_case's words; a
        child that says less than the truth leaves the slots poisoned: wrong values)."""
        got = {m.name: m for m in run.outputs}
        for meta in case.outputs:
            r = got.get(meta.name)
            if r is None:
                return f"output {meta.name} missing"
            if r.dtype != meta.dtype:
                return f"output {meta.name} has dtype {r.dtype}, the definition says {meta.dtype}"
            expected = list(meta.shape or ())
            if list(r.shape or ()) != expected:
                return f"output {meta.name} has shape {list(r.shape or ())}, the definition says {expected}"
        return ""

    def check(
        self,
        problem: Problem,
        case: CaseData,
        label: str,
        got: dict[str, torch.Tensor],
        floor: dict[str, Floor] | None = None,
    ) -> SeedCheck:
        """`case_check.check_case`'s values part, in place (the slots have the definition's dtypes
        and shapes)."""
        refs = self.jd.refs[case.name]
        return check_on_device(
            label, got, refs.refs, tolerance_for(problem.definition), stats=refs.norms, floor=floor
        )

    def overflowed(self, case: CaseData, got: dict[str, torch.Tensor]) -> list[str]:
        """The outputs with a non-finite value where the reference is finite."""
        bad = []
        for name, ref in self.jd.refs[case.name].refs.items():
            t = got.get(name)
            if t is None or not t.is_floating_point() or t.shape != ref.shape:
                continue
            if bool((~torch.isfinite(t) & torch.isfinite(ref)).any()):
                bad.append(name)
        return bad

    def floor(self, name: str) -> dict[str, Floor]:
        return self.jd.floor(name)

    # --- timing rounds -----------------------------------------------------------------------

    def poison_timed(self) -> None:
        for t in range(self.timed_calls):
            for o in self.timed_outputs:
                self.buffers.poison(timed_slot(t, o.name))

    def read_round(self, problem: Problem, tr: TimedRound, calls: int, copies: int) -> RoundRead:
        """Round `tr`'s kept outputs (`copies` x `calls` of them: the calls, then their graph
        replays), read while the child is stopped after it: every call's values at the secret
        positions, the secret calls checked in full. (Not poisoned again after: a call that
        leaves an earlier round's outputs there is wrong for this round's fresh inputs.)"""
        kept = min(calls * copies, self.timed_calls)
        samples: dict[str, np.ndarray] = {}
        for o in self.timed_outputs:
            pos = torch.from_numpy(tr.positions[o.name]).to(self.jd.device)
            rows = [
                self.buffers.view(timed_slot(t, o.name)).reshape(-1)[pos[t % calls]].to(torch.float64)
                for t in range(kept)
            ]
            samples[o.name] = torch.stack(rows).cpu().numpy() if rows else np.zeros((0, 0))
        full = {}
        for t, case in tr.full_cases.items():
            got = {o.name: self.buffers.view(timed_slot(t, o.name)) for o in self.timed_outputs}
            full[t] = self.check(problem, case, f"timed:r{tr.k}-call{t}", got)
        return RoundRead(samples=samples, full=full)


def snapshot(reads: dict[str, CaseRead]) -> dict[str, CaseRead]:
    """The reads with their outputs copied out of the region (taken while the child is
    stopped: what a later judgment of these cases must use, whatever the child writes after)."""
    return {
        k: msgspec.structs.replace(r, outputs={n: t.clone() for n, t in r.outputs.items()})
        for k, r in reads.items()
    }


__all__ = [
    "CaseRead",
    "InPlace",
    "JudgeData",
    "RoundRead",
    "judge_data",
    "snapshot",
]
