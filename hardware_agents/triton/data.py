"""Inputs and references of one problem's correctness cases, staged for sandboxed runs.

A `ProblemData` holds every case of a profile plan (the seeds and adversarial cases of
each workload the plan checks): the inputs as torch.save'd CPU tensors in a directory the
sandbox may read, and the float64 references (computed once by the reference harness in
its own sandboxed child, on the kernels' device) with their comparison statistics, and, on
first demand, a case's float32 floor (`ProblemData.floor`, measured by the reference
harness too). A `DataCache` keeps the last few problems in the LRU every agent uses
(`hardware_agents.datacache`).
"""

from __future__ import annotations

import math
import os
import secrets
import shutil
import tempfile
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TypeVar

import msgspec
import numpy as np
import torch

from accelopt.problem import Definition, Problem, TensorSpec, Tolerance, Workload
from hardware_agents import datacache
from hardware_agents.pipeline import compare, fp32, inputgen
from hardware_agents.pipeline.cases import PlannedCase, adversarial_overflow, fresh_seed
from hardware_agents.triton import timed_inputs
from hardware_agents.triton.inputs import axis_values, case_inputs, is_float
from hardware_agents.triton.records import TensorMeta
from hardware_agents.triton.reference import RefCase, RefRequest, RefRound

T = TypeVar("T")

# Correctness bar of a definition without x_tolerance, by its narrowest float output:
# FlashInfer-Bench's default atol = rtol = 1e-2 for 16-bit and 8-bit outputs, plus a relative
# L2 bound a little above their rounding error; fp32 outputs keep the validity default.
LOW_PRECISION_TOLERANCE = Tolerance(rel_l2=1e-2, atol=1e-2, rtol=1e-2)


def tolerance_for(definition: Definition) -> Tolerance:
    if definition.x_tolerance is not None:
        return definition.x_tolerance
    dtypes = [s.dtype for s in definition.outputs.values() if is_float(s.dtype)]
    if any(d != "float32" for d in dtypes):
        return LOW_PRECISION_TOLERANCE
    return Tolerance()


def _metas(definition: Definition, workload: Workload, specs: dict[str, TensorSpec]) -> list[TensorMeta]:
    """`specs` (the definition's inputs or outputs) with their shapes at `workload`'s axes."""
    axes = axis_values(definition, workload)
    out = []
    for name, spec in specs.items():
        shape = definition.shape_of(name, axes)
        out.append(TensorMeta(name=name, dtype=spec.dtype, shape=list(shape) if shape is not None else None))
    return out


def output_metas(definition: Definition, workload: Workload) -> list[TensorMeta]:
    return _metas(definition, workload, definition.outputs)


def input_metas(definition: Definition, workload: Workload) -> list[TensorMeta]:
    return _metas(definition, workload, definition.inputs)


class CaseData:
    def __init__(
        self,
        planned: PlannedCase,
        inputs_file: str,
        scalars: dict[str, float | int | bool],
        outputs: list[TensorMeta],
        ref64: dict[str, np.ndarray],
        tol: Tolerance,
        set_bytes: int,
    ) -> None:
        self.planned = planned
        self.name = planned.name
        self.inputs_file = inputs_file
        self.scalars = scalars
        self.outputs = outputs
        self.ref64 = ref64
        self.set_bytes = set_bytes
        self.stats = {n: compare.RefStats(r, tol) for n, r in ref64.items()}


RefRunner = Callable[[RefRequest, Sequence[str]], dict[str, dict[str, torch.Tensor]]]


def to_float64(t: torch.Tensor) -> np.ndarray:
    if t.dtype == torch.bool:
        return t.to(torch.int64).numpy().astype(np.float64)
    return t.detach().to("cpu", torch.float64).numpy()


class TimingPlan(msgspec.Struct, frozen=True, kw_only=True):
    """What the timing rounds of a profile need drawn in advance: `rounds` rounds of
    `calls` calls on `per_round` fresh base contents at the workload of the correctness case
    `like`; `samples` secret positions per output of every call, and `full` calls per round
    checked in full. With `positions_in_round` (outputs too large to keep every call's), the
    positions travel in the round file and the last call is the one checked in full."""

    like: str
    rounds: int
    per_round: int
    calls: int
    samples: int = 128
    full: int = 1
    positions_in_round: bool = False
    reference_budget_s: float = 20.0  # reference work for the rounds beyond 4 calls each (see RefRequest)


def timing_bases(plan: Sequence[PlannedCase], tp: TimingPlan) -> list[list[PlannedCase]]:
    """The base contents of each timing round: `per_round` cases at the workload of the
    correctness case `like`, on seeds from the OS's random source (never a correctness seed)."""
    base = next(pc for pc in plan if pc.name == tp.like)
    used = {pc.case.seed for pc in plan}
    out = []
    for k in range(tp.rounds):
        row = []
        for j in range(tp.per_round):
            seed = fresh_seed(used)
            used.add(seed)
            case = inputgen.InputCase(name=f"timing-r{k}-c{j}", seed=seed)
            row.append(
                PlannedCase(name=f"timing-r{k}-c{j}", workload=base.workload, case=case, label=base.label)
            )
        out.append(row)
    return out


class TimedRound:
    """One timing round as the parent holds it: the round file (base contents, masks, the
    calls' content and shift; readable by the reference child only, until the agent hands it
    over), and the secret part: positions sampled per call, the calls checked in full, and
    the references at exactly those (computed by the reference child before the kernel's
    child starts)."""

    def __init__(
        self,
        k: int,
        file: str,
        calls: list[tuple[int, int]],
        positions: dict[str, np.ndarray],
        order: list[int],
        full: list[int],
    ) -> None:
        self.k, self.file, self.calls, self.positions = k, file, calls, positions
        self.order, self.full = order, full  # the secret order of the checked calls; the full ones lead it
        self.ref_samples: dict[str, np.ndarray] = {}  # output -> [calls, samples] float64
        self.ref_rms: dict[str, np.ndarray] = {}  # output -> [calls] (the allclose rule's atol scale)
        self.covered = np.zeros(len(calls), dtype=bool)  # calls whose reference was computed
        self.full_cases: dict[int, CaseData] = {}

    def checks_payload(self) -> dict[str, object]:
        """What the agent tells the child once the round is over (see `checks_file`)."""
        return {
            "positions": {n: torch.from_numpy(p) for n, p in self.positions.items()},
            "full": torch.tensor(self.full, dtype=torch.int64),
        }


def _draw_all(
    cases: Sequence[PlannedCase], d: Definition, data_roots: Sequence[str | Path]
) -> dict[str, tuple[dict[str, torch.Tensor], dict[str, float | int | bool]]]:
    """Every case's inputs, drawn on several threads (numpy's generators release the GIL while
    they fill an array: a GPU host draws a problem's dozen production-size inputs at once)."""
    from concurrent.futures import ThreadPoolExecutor

    workers = max(1, min(8, os.cpu_count() or 1, len(cases)))
    with ThreadPoolExecutor(workers, thread_name_prefix="accelopt-inputs") as pool:
        drawn = list(pool.map(lambda pc: case_inputs(d, pc.workload, pc.case, data_roots), cases))
    return {pc.name: got for pc, got in zip(cases, drawn, strict=True)}


def timed_structure(base: dict[str, torch.Tensor], like: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """A timing round's base content with the integer inputs (index pointers, page tables,
    lengths) of the correctness case `like`: every timed call runs on the workload's one
    structure, as FlashInfer-Bench times a workload and as `do_bench` on that case does, while
    its float values stay fresh per call (`timed_inputs`). Drawing the structure afresh would
    time other sequence lengths every round (a paged decode's time follows its longest
    sequence). Where no float input takes a mask, every input stays fresh."""
    if not any(timed_inputs.maskable(t.dtype) for t in base.values()):
        return base
    return {n: like[n] if not t.is_floating_point() and n in like else t for n, t in base.items()}


def save_readable(obj: object, path: Path) -> None:
    """torch.save, then readable by a child of another uid (as root), whatever the umask."""
    torch.save(obj, path)
    os.chmod(path, 0o644)


def _draw_round(
    k: int, tp: TimingPlan, bases: list[dict[str, torch.Tensor]], outputs: list[TensorMeta], directory: Path
) -> TimedRound:
    gen = torch.Generator().manual_seed(secrets.randbits(63))
    masks = {
        n: timed_inputs.make_mask(t.numel(), t.dtype, gen)
        for n, t in bases[0].items()
        if timed_inputs.maskable(t.dtype)
    }
    calls = timed_inputs.draw_calls(
        tp.calls, tp.per_round, {n: m.numel() // 2 for n, m in masks.items()}, gen
    )
    positions = {
        o.name: timed_inputs.sample_positions(math.prod(o.shape or ()), tp.calls, tp.samples, gen).numpy()
        for o in outputs
    }
    order = torch.randperm(tp.calls, generator=gen).tolist()
    if tp.positions_in_round:  # the child sends back the last call's outputs in full
        order.remove(tp.calls - 1)
        order.insert(0, tp.calls - 1)
        full = [tp.calls - 1]
    else:
        full = order[: tp.full]
    payload: dict[str, object] = {
        "contents": bases,
        "masks": masks,
        "calls": torch.tensor(calls, dtype=torch.int64).reshape(-1, 2),
    }
    if tp.positions_in_round:
        payload["positions"] = {n: torch.from_numpy(p) for n, p in positions.items()}
    path = directory / f"round-{k}-{secrets.token_hex(8)}.pt"  # unguessable: the folder is not listable
    save_readable(payload, path)
    return TimedRound(k, str(path), calls, positions, order, full)


class ProblemData:
    """Every planned case of one problem: input files under `self.dir` (the kernel's sandbox
    may read it), references in memory only. With `timing`, also the timing rounds
    (`TimedRound`): their files under `self.timing_dir`, which only the reference child may
    read (the agent hands a round's file to the kernel's child when it times that round),
    and the references at the checked positions and calls, in memory too."""

    def __init__(
        self,
        problem: Problem,
        plan: Sequence[PlannedCase],
        root: Path,
        run_reference: RefRunner,
        data_roots: Sequence[str | Path] = (),
        timing: TimingPlan | None = None,
    ) -> None:
        """Long because it builds a profile's data in one transaction: every case's inputs, the
        timing rounds' structures, one run of the reference child for all of them and the
        checked positions, with the folder removed if any part fails."""
        self.dir = Path(tempfile.mkdtemp(prefix="triton-data-", dir=root))
        os.chmod(self.dir, 0o755)
        self.timing_dir = Path(tempfile.mkdtemp(prefix="triton-timing-", dir=root))
        # the reference child (another uid) opens its files by name; nobody may list them: a
        # thread of the kernel's process that Landlock could not reach (ABI < 8) has the
        # sandbox uid's access only, and never learns the names of rounds still to come
        os.chmod(self.timing_dir, 0o711)
        self.cases: list[CaseData] = []
        self.rounds: list[TimedRound] = []
        self.calibration_file = ""  # zeros of a round file's size: the calibration rounds' set-ups
        self.notes: list[str] = []
        self._run_reference = run_reference
        self._floors: dict[str, dict[str, fp32.Fp32Floor]] = {}
        self._floor_lock = threading.Lock()
        self._kept: dict[str, object] = {}  # what the judge keeps of the problem for its life (`keep`)
        self._kept_lock = threading.Lock()
        d = problem.definition
        tol = tolerance_for(d)
        try:
            staged: list[tuple[PlannedCase, str, dict, list[TensorMeta], int]] = []
            like_tensors: dict[str, torch.Tensor] = {}
            bases_of = timing_bases(plan, timing) if timing is not None else []
            drawn = _draw_all([*plan, *(pc for row in bases_of for pc in row)], d, data_roots)
            for pc in plan:
                tensors, scalars = drawn[pc.name]
                if timing is not None and pc.name == timing.like:
                    like_tensors = tensors
                path = self.dir / f"{pc.name}.pt"
                save_readable(tensors, path)
                outs = output_metas(d, pc.workload)
                staged.append((pc, str(path), scalars, outs, _set_bytes(tensors, outs)))
            ref_rounds: list[RefRound] = []
            if timing is not None:
                like = next(st for st in staged if st[0].name == timing.like)
                for k, row in enumerate(bases_of):
                    bases = [timed_structure(drawn[pc.name][0], like_tensors) for pc in row]
                    if not k:
                        zeros = [{n: torch.zeros_like(t) for n, t in b.items()} for b in bases]
                        self.calibration_file = _draw_round(-1, timing, zeros, like[3], self.timing_dir).file
                    tr = _draw_round(k, timing, bases, like[3], self.timing_dir)
                    checks = self.timing_dir / f"checks-{k}-{secrets.token_hex(8)}.pt"
                    save_readable(tr.checks_payload(), checks)
                    self.rounds.append(tr)
                    ref_rounds.append(
                        RefRound(
                            name=f"timing-r{k}",
                            round_file=tr.file,
                            checks_file=str(checks),
                            order=tr.order,
                            scalars=like[2],
                        )
                    )
            request = RefRequest(
                definition=d.name,
                source=d.reference,
                inputs=input_metas(d, problem.workload),
                outputs=list(d.outputs),
                output_dtypes={n: o.dtype for n, o in d.outputs.items()},
                cases=[RefCase(name=pc.name, inputs_file=f, scalars=sc) for pc, f, sc, _, _ in staged],
                rounds=ref_rounds,
                round_budget_s=timing.reference_budget_s if timing is not None else 0.0,
            )
            self._floor_request = msgspec.structs.replace(request, cases=[], rounds=[], round_budget_s=0.0)
            refs = run_reference(request, [str(self.dir), str(self.timing_dir)])
            for pc, f, sc, outs, nbytes in staged:
                ref64 = _ref64(d.name, refs[pc.name], outs, pc.label)
                overflow = adversarial_overflow(d.name, pc.case, ref64)
                if overflow is not None:
                    if d.x_adversarial is not None:  # declared: the problem must be fixed
                        raise ValueError(overflow)
                    bad = [n for n, r in ref64.items() if not np.all(np.isfinite(r))]
                    self.notes.append(
                        f"adversarial case {pc.case.name!r} skipped at {pc.label}: the reference "
                        f"overflows {', '.join(bad)} at those magnitudes (set x_adversarial)"
                    )
                    continue
                self.cases.append(CaseData(pc, f, sc, outs, ref64, tol, nbytes))
            if timing is not None:
                like = next(st for st in staged if st[0].name == timing.like)
                for tr in self.rounds:
                    got = refs[f"timing-r{tr.k}"]
                    tr.ref_samples = {n: got[f"samples/{n}"].numpy() for n in d.outputs}
                    tr.ref_rms = {n: got[f"rms/{n}"].numpy() for n in d.outputs}
                    tr.covered = got["covered"].numpy().astype(bool)
                    for t in tr.full:
                        full = {n: got[f"full/{t}/{n}"] for n in d.outputs}
                        pc = msgspec.structs.replace(like[0], name=f"timed-r{tr.k}-call{t}")
                        tr.full_cases[t] = CaseData(
                            pc, "", like[2], like[3], _ref64(d.name, full, like[3], pc.label), tol, like[4]
                        )
        except BaseException:
            self.remove()
            raise
        self.by_name = {c.name: c for c in self.cases}

    def floor(self, name: str) -> dict[str, fp32.Fp32Floor]:
        """Case `name`'s float32 floor (`fp32.Fp32Floor`): the spread of the reference's
        own float32 evaluations on its inputs (`reference.fp32_floor_of`), measured by the
        reference harness in a sandboxed child of its own (never by the kernel's process) on
        first demand, then kept with the problem's data. Raises what running it raised."""
        with self._floor_lock:
            if name not in self._floors:
                case = self.by_name[name]
                request = msgspec.structs.replace(
                    self._floor_request,
                    cases=[RefCase(name=name, inputs_file=case.inputs_file, scalars=case.scalars)],
                    fp32_floor=True,
                    floor_seed=case.planned.case.seed,
                )
                got = self._run_reference(request, [str(self.dir)])[name]
                self._floors[name] = {
                    o: fp32.Fp32Floor(
                        rows=got[f"rows/{o}"].numpy().astype(np.float32),
                        rel_l2=float(got[f"rel_l2/{o}"]),
                    )
                    for o in case.ref64
                }
            return self._floors[name]

    def keep(self, key: str, build: Callable[[], T]) -> T:
        """`build()` once per problem and key, then kept with the problem's data (the judge's
        references and pristine inputs on its device: `device_judge.judge_data`)."""
        with self._kept_lock:
            if key not in self._kept:
                self._kept[key] = build()
            return self._kept[key]  # type: ignore[return-value]

    def remove(self) -> None:
        self._kept.clear()
        shutil.rmtree(self.dir, ignore_errors=True)
        shutil.rmtree(self.timing_dir, ignore_errors=True)


def _dt(name: str) -> torch.dtype:
    from hardware_agents.triton.inputs import torch_dtype

    return torch_dtype(name)


def _set_bytes(tensors: dict[str, torch.Tensor], outs: list[TensorMeta]) -> int:
    nbytes = sum(t.numel() * t.element_size() for t in tensors.values())
    return nbytes + sum(
        math.prod(o.shape or ()) * torch.empty((), dtype=_dt(o.dtype)).element_size() for o in outs
    )


def _ref64(
    definition: str, ref: dict[str, torch.Tensor], outs: list[TensorMeta], label: str
) -> dict[str, np.ndarray]:
    """A reference's outputs as float64, checked against the definition's shapes; floats
    rounded to the output dtype first (the exact answer as that dtype holds it: fp16 overflows)."""
    ref64: dict[str, np.ndarray] = {}
    for meta in outs:
        t = ref.get(meta.name)
        if t is None:
            raise ValueError(f"{definition}: the reference produced no output {meta.name}")
        if meta.shape is not None and list(t.shape) != meta.shape:
            raise ValueError(
                f"{definition}: reference output {meta.name} has shape {list(t.shape)}, "
                f"the definition says {meta.shape} (workload {label})"
            )
        if t.is_floating_point():
            t = t.to(_dt(meta.dtype))
        ref64[meta.name] = to_float64(t)
    return ref64


class DataCache:
    """The last few problems' data, in the LRU of `hardware_agents.datacache`, keyed by
    (problem hash, plan, device, timing); the staging dir goes away on close/GC/exit."""

    def __init__(self, capacity: int = 3, base_dir: Path | None = None) -> None:
        # 0755: the sandboxed children (other uids) read the inputs; references are in memory
        self._cache: datacache.DataCache[ProblemData] = datacache.DataCache(
            _by_lookup_only, capacity=capacity, base_dir=base_dir, prefix="accelopt-triton-data-", mode=0o755
        )

    @property
    def root(self) -> Path:
        root = self._cache.root
        assert root is not None
        return root

    def get(
        self,
        problem: Problem,
        plan: Sequence[PlannedCase],
        run_reference: RefRunner,
        *,
        device: str,
        data_roots: Sequence[str | Path] = (),
        timing: TimingPlan | None = None,
    ) -> ProblemData:
        """`timing`: the timing rounds to draw too (see `TimingPlan`); drawn once per cached
        problem (each profile's child is new to them: it can keep nothing across profiles)."""
        key = (
            problem.content_hash(),
            msgspec.json.encode(list(plan)).decode(),
            device,
            msgspec.json.encode(timing).decode() if timing else None,
        )

        def build(root: Path | None) -> ProblemData:
            assert root is not None
            return ProblemData(problem, plan, root, run_reference, data_roots, timing)

        return self._cache.lookup(key, build)

    def close(self) -> None:
        self._cache.close()


def _by_lookup_only(problem: Problem, seeds: tuple[int, ...], root: Path | None) -> ProblemData:
    raise TypeError("the Triton data cache builds entries through DataCache.get(problem, plan, ...)")
