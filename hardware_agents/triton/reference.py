"""The reference side: runs a definition's PyTorch `run` in a sandboxed child (trusted
harness, third-party reference code), on the device the kernels will run on.

Float inputs narrower than fp32 are upcast to fp32 first, so the reference is computed at
least in fp32 even where the reference code would compute in bf16 (a better bar than
FlashInfer-Bench's same-dtype reference; integer inputs are passed as they are). Outputs
are saved as CPU tensors; the parent converts them to float64 numpy and judges kernels
against them.
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
    scalars: dict[str, float | int | bool] = {}


class RefRequest(msgspec.Struct, kw_only=True, frozen=True):
    definition: str
    source: str
    inputs: list[TensorMeta]  # definition order
    outputs: list[str]
    cases: list[RefCase]
    output_dtypes: dict[str, str] = {}  # references of timed calls are rounded to these before sampling
    rounds: list[RefRound] = []
    device: str = "cpu"


class RefResult(msgspec.Struct, kw_only=True):
    files: dict[str, str]  # case -> output file (relative to the work dir)
    seconds: float = 0.0


def _upcast(t: torch.Tensor) -> torch.Tensor:
    if t.is_floating_point() and t.element_size() < 4:
        return t.to(torch.float32)
    return t


def _as_outputs(result: Any, names: list[str], definition: str, device: str = "cpu") -> dict[str, torch.Tensor]:
    values = list(result) if isinstance(result, tuple | list) else [result]
    if len(values) != len(names):
        raise ValueError(f"{definition}: the reference returned {len(values)} values, the definition has "
                         f"{len(names)} outputs ({', '.join(names)})")
    out = {}
    for name, v in zip(names, values, strict=True):
        t = v if isinstance(v, torch.Tensor) else torch.as_tensor(v)
        out[name] = t.detach().to(device).contiguous()
    return out


def run_reference(payload: bytes, workdir: Path) -> RefResult:
    """Sandbox target: every case's reference outputs into out/ref-<case>.pt."""
    req = msgspec.msgpack.decode(payload, type=RefRequest)
    t0 = time.perf_counter()
    ns: dict[str, Any] = {"__name__": f"reference_{req.definition}"}
    exec(compile(req.source, f"<reference of {req.definition}>", "exec"), ns)
    run = ns["run"]
    device = torch.device(req.device)
    (workdir / "out").mkdir(exist_ok=True)
    files = {}
    for case in req.cases:
        tensors = torch.load(case.inputs_file, weights_only=True)
        args = [case.scalars[m.name] if m.shape is None else _upcast(tensors[m.name].to(device))
                for m in req.inputs]
        with torch.no_grad():
            result = run(*args)
        if device.type == "cuda":
            torch.cuda.synchronize()
        rel = f"out/ref-{case.name}.pt"
        torch.save(_as_outputs(result, req.outputs, req.definition), workdir / rel)
        files[case.name] = rel
    for rnd in req.rounds:
        rel = f"out/ref-{rnd.name}.pt"
        torch.save(_round_references(run, req, rnd, device), workdir / rel)
        files[rnd.name] = rel
    return RefResult(files=files, seconds=time.perf_counter() - t0)


def _round_references(run: Any, req: RefRequest, rnd: RefRound, device: torch.device) -> dict[str, torch.Tensor]:
    """Per output: `samples/<out>` [calls, positions] and `rms/<out>` [calls] of every call's
    reference, rounded to the output dtype, and `full/<call>/<out>` for the calls checked in full."""
    data = torch.load(rnd.round_file, weights_only=True)
    checks = torch.load(rnd.checks_file, weights_only=True)
    contents = [{n: t.to(device) for n, t in c.items()} for c in data["contents"]]
    masks = {n: t.to(device) for n, t in data["masks"].items()}
    full = set(checks["full"].tolist())
    samples: dict[str, list[torch.Tensor]] = {n: [] for n in req.outputs}
    rms: dict[str, list[float]] = {n: [] for n in req.outputs}
    out: dict[str, torch.Tensor] = {}
    for t, (c, shift) in enumerate(data["calls"].tolist()):
        args: list[Any] = []
        for m in req.inputs:
            if m.shape is None:
                args.append(rnd.scalars[m.name])
            else:
                args.append(_upcast(timed_inputs.derive(contents[c][m.name], masks.get(m.name), shift)))
        with torch.no_grad():
            result = _as_outputs(run(*args), req.outputs, req.definition, device=str(device))
        for name, ref in result.items():
            dtype = req.output_dtypes.get(name)
            if ref.is_floating_point() and dtype in TORCH_DTYPES:
                ref = ref.to(TORCH_DTYPES[dtype])
            flat = ref.reshape(-1).to(torch.float64)
            samples[name].append(flat[checks["positions"][name][t].to(flat.device)].cpu())
            finite = flat[torch.isfinite(flat)]
            rms[name].append(float(finite.square().mean().sqrt()) if finite.numel() else 0.0)
            if t in full:
                out[f"full/{t}/{name}"] = ref.cpu()
    for name in req.outputs:
        out[f"samples/{name}"] = torch.stack(samples[name]) if samples[name] else torch.zeros((0, 0))
        out[f"rms/{name}"] = torch.tensor(rms[name], dtype=torch.float64)
    return out
