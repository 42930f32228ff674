"""The reference side: runs a definition's PyTorch `run` in a sandboxed child (trusted
harness, third-party reference code), on the device the kernels will run on.

Float inputs narrower than fp32 are upcast to fp32 first, so the reference is computed at
least in fp32 even where the reference code would compute in bf16 (a better bar than
FlashInfer-Bench's same-dtype reference; integer inputs are passed as they are). Outputs
are saved as CPU tensors; the parent converts them to float64 numpy and judges kernels
against them.

With `fp32_floor`, the child measures instead what float32 itself cannot resolve on each
case's inputs (`fp32_floor_of`): the parent's `fp32.Fp32Floor`, for a case the kernel
missed only there.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import msgspec
import torch

# Imported up front: after the sandbox's privilege drop the interpreter may not be able to
# read its own library, so lazy imports inside torch must already have happened.
import torch.nn.functional

from hardware_agents.triton import timed_inputs
from hardware_agents.triton.inputs import TORCH_DTYPES
from hardware_agents.triton.records import TensorMeta
from hardware_agents.triton.returned import returned_values


class RefCase(msgspec.Struct, kw_only=True, frozen=True):
    name: str
    inputs_file: str
    scalars: dict[str, float | int | bool] = {}


class RefRound(msgspec.Struct, kw_only=True, frozen=True):
    """A timing round: every call's content is derived from the round file as the kernel's
    child derives it (`timed_inputs`); the checks file names the positions to sample of each
    call's reference and the calls to save in full."""

    name: str
    round_file: str
    checks_file: str
    order: list[int] = []  # the calls in the order to compute them (a secret random order)
    scalars: dict[str, float | int | bool] = {}


class RefRequest(msgspec.Struct, kw_only=True, frozen=True):
    definition: str
    source: str
    inputs: list[TensorMeta]  # definition order
    outputs: list[str]
    cases: list[RefCase]
    output_dtypes: dict[str, str] = {}  # references of timed calls are rounded to these before sampling
    rounds: list[RefRound] = []
    # seconds of reference work the timing rounds may take (beyond the first `min_calls` of
    # each): where the reference is slow, the calls checked are a random part of them
    round_budget_s: float = 20.0
    min_calls: int = 4
    device: str = "cpu"
    # per case, float32's own error on its inputs (`fp32_floor_of`) instead of the outputs
    fp32_floor: bool = False
    floor_seed: int = 0


class RefResult(msgspec.Struct, kw_only=True):
    files: dict[str, str]  # case -> output file (relative to the work dir)
    seconds: float = 0.0


def _upcast(t: torch.Tensor) -> torch.Tensor:
    if t.is_floating_point() and t.element_size() < 4:
        return t.to(torch.float32)
    return t


def _as_outputs(
    result: Any, names: list[str], definition: str, device: str = "cpu"
) -> dict[str, torch.Tensor]:
    """The reference's return value as {output: tensor}: one value, a tuple/list in the
    definition's order, or a dict keyed by output name (as FlashInfer-Bench accepts; keys that
    are not outputs are ignored)."""
    values = returned_values(result, names, f"{definition}: the reference")
    out = {}
    for name, v in zip(names, values, strict=True):
        t = v if isinstance(v, torch.Tensor) else torch.as_tensor(v)
        out[name] = t.detach().to(device).contiguous()
    return out


def full_float32() -> None:
    """Float32 arithmetic in full on a GPU: cuDNN's convolutions use TF32 (a 10-bit mantissa)
    by default, which would make the references, and the float32 floor measured from them
    (`fp32_floor_of`), TF32's, and pass a kernel that computes in TF32."""
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False


def run_reference(payload: bytes, workdir: Path) -> RefResult:
    """Sandbox target: every case's reference outputs into out/ref-<case>.pt."""
    req = msgspec.msgpack.decode(payload, type=RefRequest)
    t0 = time.perf_counter()
    full_float32()
    ns: dict[str, Any] = {"__name__": f"reference_{req.definition}"}
    exec(compile(req.source, f"<reference of {req.definition}>", "exec"), ns)
    run = ns["run"]
    device = torch.device(req.device)
    (workdir / "out").mkdir(exist_ok=True)
    files = {}
    for case in req.cases:
        tensors = torch.load(case.inputs_file, weights_only=True)
        args = [
            case.scalars[m.name] if m.shape is None else _upcast(tensors[m.name].to(device))
            for m in req.inputs
        ]
        if req.fp32_floor:
            rel = f"out/floor-{case.name}.pt"
            torch.save(fp32_floor_of(run, args, req, device), workdir / rel)
            files[case.name] = rel
            continue
        with torch.no_grad():
            result = run(*args)
        if device.type == "cuda":
            torch.cuda.synchronize()
        rel = f"out/ref-{case.name}.pt"
        torch.save(_as_outputs(result, req.outputs, req.definition), workdir / rel)
        files[case.name] = rel
    for rnd, refs in zip(req.rounds, _round_references(run, req, device), strict=True):
        rel = f"out/ref-{rnd.name}.pt"
        torch.save(refs, workdir / rel)
        files[rnd.name] = rel
    return RefResult(files=files, seconds=time.perf_counter() - t0)


FLOOR_TWINS = 2  # evaluations on inputs moved by one ulp, each in its own random directions


def fp32_floor_of(
    run: Any, args: list[Any], req: RefRequest, device: torch.device
) -> dict[str, torch.Tensor]:
    """What float32 cannot resolve on one case's inputs, per output: `rows/<out>` (float32, per
    row of the output: the elements sharing every index but the last, the largest error in
    it) and `rel_l2/<out>` (0-d float64), for `fp32.Fp32Floor`.

    The reference here is float32 arithmetic already (inputs upcast to float32; FlashInfer-Bench
    references cast to float32 themselves, so a float64 evaluation is not to be had from
    them). Its error is therefore measured as the spread of float32 evaluations: the
    reference re-run on the same inputs moved by one float32 unit in the last place in random
    directions (`FLOOR_TWINS` times; integer inputs unchanged), against its run on the inputs
    themselves. A rounding pattern is a chaotic function of the inputs, so each twin rounds
    afresh, as a kernel summing in another order does: where the result is well conditioned
    the spread is a few ulps of it, and where scores nearly tie at float32 resolution (a
    softmax over logits of 1e6) it is as large as float32 makes it there. A non-finite
    twin says nothing (0 there)."""
    gen = torch.Generator().manual_seed(req.floor_seed)
    with torch.no_grad():
        base = _as_outputs(run(*args), req.outputs, req.definition, device=str(device))
        base64 = {n: t.to(torch.float64) for n, t in base.items()}
        worst = {n: torch.zeros_like(t) for n, t in base64.items()}
        for _ in range(FLOOR_TWINS):
            twin = _as_outputs(run(*[_moved(a, gen) for a in args]), req.outputs, req.definition, str(device))
            for name, ref in base64.items():
                e = (twin[name].to(torch.float64) - ref).abs()
                e[~torch.isfinite(e)] = 0.0
                torch.maximum(worst[name], e, out=worst[name])
    out: dict[str, torch.Tensor] = {}
    for name, e in worst.items():
        ref = base64[name]
        finite = ref[torch.isfinite(ref)]
        norm = float(finite.norm()) if finite.numel() else 0.0
        out[f"rel_l2/{name}"] = torch.tensor(float(e.norm()) / norm if norm > 0 else 0.0, dtype=torch.float64)
        rows = e.reshape(-1, e.shape[-1]).amax(dim=1) if e.dim() and e.numel() else e.reshape(-1)
        out[f"rows/{name}"] = rows.to(torch.float32).cpu()
    return out


def _moved(a: Any, gen: torch.Generator) -> Any:
    """A float32 input moved by one ulp, each element up or down at random (others as they are)."""
    if not isinstance(a, torch.Tensor) or a.dtype != torch.float32:
        return a
    up = torch.rand(a.shape, generator=gen) < 0.5
    away = torch.where(up, torch.tensor(float("inf")), torch.tensor(float("-inf"))).to(a.device)
    return torch.nextafter(a, away)


class _RoundState:
    """One timing round being referenced: its contents on the device and what is done."""

    def __init__(self, rnd: RefRound, outputs: list[str], device: torch.device) -> None:
        data = torch.load(rnd.round_file, weights_only=True)
        checks = torch.load(rnd.checks_file, weights_only=True)
        self.rnd = rnd
        self.contents = [{n: t.to(device) for n, t in c.items()} for c in data["contents"]]
        self.masks = {n: t.to(device) for n, t in data["masks"].items()}
        self.calls = [(int(c), int(s)) for c, s in data["calls"].tolist()]
        self.positions = checks["positions"]
        self.full = set(checks["full"].tolist())
        n = len(self.calls)
        self.samples = {
            o: torch.full(tuple(self.positions[o].shape), float("nan"), dtype=torch.float64) for o in outputs
        }
        self.rms = {o: torch.zeros(n, dtype=torch.float64) for o in outputs}
        self.covered = torch.zeros(n, dtype=torch.bool)
        self.out: dict[str, torch.Tensor] = {}

    def result(self) -> dict[str, torch.Tensor]:
        return {
            **self.out,
            **{f"samples/{o}": v for o, v in self.samples.items()},
            **{f"rms/{o}": v for o, v in self.rms.items()},
            "covered": self.covered,
        }


def _round_references(run: Any, req: RefRequest, device: torch.device) -> list[dict[str, torch.Tensor]]:
    """Per round, per output: `samples/<out>` [calls, positions] and `rms/<out>` [calls] of the
    references of its calls (rounded to the output dtype), `full/<call>/<out>` for the calls
    checked in full, and `covered` [calls]: which calls were computed. Calls go in each
    round's secret order, the rounds in turn, until `round_budget_s` is spent (at least
    `min_calls` per round, the full ones first)."""
    states = [_RoundState(rnd, req.outputs, device) for rnd in req.rounds]
    t0 = time.perf_counter()
    longest = max((len(st.rnd.order) for st in states), default=0)
    for i in range(longest):
        if i >= req.min_calls and time.perf_counter() - t0 > req.round_budget_s:
            break
        for st in states:
            if i < len(st.rnd.order):
                _reference_call(run, req, st, st.rnd.order[i], device)
    return [st.result() for st in states]


def _reference_call(run: Any, req: RefRequest, st: _RoundState, t: int, device: torch.device) -> None:
    c, shift = st.calls[t]
    args: list[Any] = []
    for m in req.inputs:
        if m.shape is None:
            args.append(st.rnd.scalars[m.name])
        else:
            args.append(_upcast(timed_inputs.derive(st.contents[c][m.name], st.masks.get(m.name), shift)))
    with torch.no_grad():
        result = _as_outputs(run(*args), req.outputs, req.definition, device=str(device))
    for name, ref in result.items():
        dtype = req.output_dtypes.get(name)
        if ref.is_floating_point() and dtype in TORCH_DTYPES:
            ref = ref.to(TORCH_DTYPES[dtype])
        flat = ref.reshape(-1).to(torch.float64)
        st.samples[name][t] = flat[st.positions[name][t].to(flat.device)].cpu()
        finite = flat[torch.isfinite(flat)]
        st.rms[name][t] = float(finite.square().mean().sqrt()) if finite.numel() else 0.0
        if t in st.full:
            st.out[f"full/{t}/{name}"] = ref.cpu()
    st.covered[t] = True
