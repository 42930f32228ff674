"""Hand-written NKIBench-format folders for the tests (no file of the real NKIBench is used).

`write_nkibench(root, problems)` writes the layout the importer reads: `summary.json`,
`seeds/<problem>.yaml`, `reference/<case>_numpy_<n>.py` (shape constants, `get_inputs`,
`forward`, `transform_to_nki_inputs`, `transform_nki_outputs`) and `kernels/<case>_0.py`.
`CATALOG` describes the 14 NKIBench problems at their NKIBench shapes (inputs as NKIBench
draws them, forward as it computes them); `shapes=` rescales a problem for tests that run it.
"""

from __future__ import annotations

import json
import textwrap
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from pathlib import Path

# name -> (size expression, init call on np.random); a float instead of a tuple is a scalar
Inputs = list[tuple[str, object]]


@dataclass(frozen=True)
class FixtureProblem:
    name: str
    values: dict[str, int]
    inputs: Inputs
    forward: str  # body of forward, 2-space indented as NKIBench writes it
    to_nki: str = "    return inputs"  # body of transform_to_nki_inputs
    kernel: str = ""  # full kernel module source; default: a stub
    case_id: str = "2"
    comments: str = ""
    extra_impls: int = 0


def _normal(scale: float = 1.0) -> str:
    return f"np.random.normal(loc=0, scale={scale}, size={{size}}).astype(np.float32)"


ABS_NORMAL = "np.abs(np.random.normal(loc=0, scale=1.0, size={size})).astype(np.float32)"

CATALOG: dict[str, FixtureProblem] = {
    p.name: p
    for p in [
        FixtureProblem("silu", {"M": 4096, "N": 7168}, [("x", ("M", "N"))], "  return x / (1 + np.exp(-x))"),
        FixtureProblem(
            "adamw",
            {"M": 10944, "N": 2048},
            [("theta", ("M", "N")), ("g", ("M", "N")), ("m", ("M", "N")), ("v", ("M", "N"), ABS_NORMAL)],
            """\
  theta_t = theta - 1e-5 * theta
  m_t = 0.9 * m + 0.1 * g
  v_t = 0.999 * v + 0.001 * g * g
  v_hat = v_t * 1000
  return theta_t - 0.01 * m_t / (np.sqrt(v_hat) + 1e-8)""",
        ),
        FixtureProblem(
            "rope_single_freq_apply",
            {"B": 1, "H": 64, "N": 4096, "D": 128},
            [("x", ("D", "B*H*N")), ("freqs_cos", ("D // 2", "B*H*N")), ("freqs_sin", ("D // 2", "B*H*N"))],
            """\
  h = D // 2
  x0, x1 = x[:h, :], x[h:, :]
  return np.concatenate([x0 * freqs_cos - x1 * freqs_sin, x0 * freqs_sin + x1 * freqs_cos], axis=0)""",
            case_id="1",
        ),
        FixtureProblem(
            "mamba",
            {"M": 7168, "C": 256, "S": 16},
            [
                (n, s, _normal(0.05))
                for n, s in (
                    ("delta", ("C", "M")),
                    ("u", ("C", "M")),
                    ("a", ("C", "S")),
                    ("b", ("S", "M")),
                    ("c", ("S", "M")),
                )
            ],
            """\
  dA = np.exp(delta[:, None, :] * a[:, :, None])
  dBu = delta[:, None, :] * b[None, :, :] * u[:, None, :]
  state = np.zeros((C, S), dtype=dA.dtype)
  out = np.empty((C, M), dtype=dA.dtype)
  for i in range(M):
      state = dA[..., i] * state + dBu[..., i]
      out[:, i] = np.sum(c[None, :, i] * state, axis=1)
  return out""",
        ),
        FixtureProblem(
            "matmul",
            {"M": 4096, "N": 12288, "K": 5120},
            [("lhs", ("M", "K")), ("rhs", ("K", "N"))],
            "  return np.matmul(lhs, rhs)",
            case_id="3",
        ),
        FixtureProblem(
            "transpose_matmul",
            {"M": 4096, "K": 2048, "N": 10944},
            [("lhs_t", ("K", "M")), ("rhs", ("K", "N"))],
            "  return np.matmul(lhs_t.T, rhs)",
        ),
        FixtureProblem(
            "bmm",
            {"B": 16, "M": 4096, "K": 64, "N": 4096},
            [("lhs", ("B", "M", "K")), ("rhs", ("B", "K", "N"))],
            "  return np.matmul(lhs, rhs)",
        ),
        FixtureProblem(
            "bmm_softmax",
            {"B": 16, "M": 4096, "K": 64, "N": 4096},
            [("lhs", ("B", "M", "K")), ("rhs", ("B", "K", "N"))],
            """\
  x = np.matmul(lhs, rhs)
  e = np.exp(x - np.max(x, axis=2, keepdims=True))
  return e / np.sum(e, axis=2, keepdims=True)""",
        ),
        FixtureProblem(
            "rmsnorm_matmul",
            {"M": 4096, "N": 2048, "K": 1024},
            [("input_tensor", ("M", "K")), ("weight_matrix", ("K", "N"))],
            """\
  rms = np.sqrt(np.sum(np.square(input_tensor) / K, axis=1, keepdims=True))
  return np.matmul(input_tensor / rms, weight_matrix)""",
        ),
        FixtureProblem(
            "add_rmsnorm_matmul",
            {"M": 4096, "N": 2048, "K": 1024},
            [("x", ("M", "K")), ("w", ("K", "N")), ("eps", 1e-5), ("z", ("M", "K")), ("g", ("K",))],
            """\
  y = x + z
  t = np.sum(np.square(y) / y.shape[-1], axis=-1, keepdims=True)
  y = y / np.sqrt((t + eps).astype(y.dtype)) * g
  return np.matmul(y, w)""",
        ),
        FixtureProblem(
            "matmul_add_rmsnorm",
            {"M": 4096, "N": 2048, "K": 2048},
            [("x", ("M", "K")), ("w", ("K", "N")), ("eps", 1e-5), ("z", ("M", "N")), ("g", ("N",))],
            """\
  y = np.matmul(x, w) + z
  return y * g / np.sqrt(np.mean(y ** 2, axis=-1, keepdims=True) + eps)""",
            case_id="1",
        ),
        FixtureProblem(
            "swiglu",
            {"M": 4096, "N": 3072, "K": 1024},
            [("x", ("M", "K")), ("w_up", ("K", "N")), ("w_down", ("N", "K")), ("w_gate", ("K", "N"))],
            """\
  gate = np.matmul(x, w_gate)
  return np.matmul(gate / (1 + np.exp(-gate)) * np.matmul(x, w_up), w_down)""",
        ),
        FixtureProblem(
            "lora",
            {"M": 4096, "N": 12288, "K": 5120, "R": 128},
            [("x", ("M", "K")), ("w", ("K", "N")), ("a", ("K", "R")), ("b", ("R", "N"))],
            "  return np.matmul(x, w) + np.matmul(np.matmul(x, a), b)",
        ),
        FixtureProblem(
            "gqa_full",
            {"B": 1, "N": 4096, "QH": 16, "KH": 8, "D": 128},
            [("q", ("B", "N", "QH", "D")), ("k", ("B", "N", "KH", "D")), ("v", ("B", "N", "KH", "D"))],
            """\
  rep = QH // KH
  xq = q.transpose(0, 2, 1, 3)
  xk = np.repeat(k, rep, axis=2).transpose(0, 2, 1, 3)
  xv = np.repeat(v, rep, axis=2).transpose(0, 2, 1, 3)
  s = (xq @ xk.transpose(0, 1, 3, 2)) / np.float32(np.sqrt(D))
  e = np.exp(s - np.max(s, axis=-1, keepdims=True))
  return (e / np.sum(e, axis=-1, keepdims=True)) @ xv""",
            case_id="0",
        ),
    ]
}

STUB_KERNEL = """\
import numpy as np
import neuronxcc.nki as nki
import neuronxcc.nki.language as nl


@nki.jit
def kernel(*args):
    raise NotImplementedError("a stub baseline of the test fixture")
"""

_FROM_NKI = """\
def transform_nki_outputs(k_res, ref):
    if not isinstance(k_res, tuple):
        k_res = (k_res,)
    refs = ref if isinstance(ref, tuple) else (ref,)
    outs = []
    for v, r in zip(k_res, refs):
        outs.append(np.reshape(v, r.shape) if hasattr(r, "shape") else v)
    return outs
"""


def shaped(name: str, **values: int) -> FixtureProblem:
    """A catalog problem at other shape values (e.g. small ones a test can run)."""
    p = CATALOG[name]
    return replace(p, values={**p.values, **values})


def _input_lines(p: FixtureProblem) -> tuple[list[str], list[str]]:
    lines, names = [], []
    for item in p.inputs:
        name, spec = item[0], item[1]
        names.append(name)
        if isinstance(spec, float | int):
            lines.append(f"{name} = {spec}")
            continue
        init = item[2] if len(item) > 2 else _normal(1.0)
        size = "(" + ", ".join(spec) + ("," if len(spec) == 1 else "") + ")"
        lines.append(f"{name} = {init.format(size=size)}")
    lines.append(f"return [{', '.join(names)}]")
    return lines, names


def _reference(p: FixtureProblem) -> str:
    body, names = _input_lines(p)
    lines = ["", "import numpy as np", ""]
    lines += [f"{k} = {v}" for k, v in p.values.items()]
    lines += [
        "",
        "def get_inputs():",
        *("    " + b for b in body),
        "    ",
        "",
        f"def forward({', '.join(names)}):",
        p.forward,
        "",
        "",
        "def transform_to_nki_inputs(inputs):",
        p.to_nki,
        "",
        "",
        _FROM_NKI,
    ]
    return "\n".join(lines)


def _seed(p: FixtureProblem) -> str:
    body, names = _input_lines(p)
    impl = f"def forward({', '.join(names)}):\n{p.forward}"
    doc = f"test_name: {p.name}\n\nparameters:\n" + "".join(f"- {k}\n" for k in p.values)
    doc += "\ninput: |\n" + "".join(f"    {b}\n" for b in body)
    doc += "\nimpl: |\n" + textwrap.indent(impl.rstrip(), "  ") + "\n"
    if p.comments:
        doc += f"\ncomments: {json.dumps(p.comments)}\n"
    return doc


@dataclass
class Written:
    root: Path
    references: dict[str, Path] = field(default_factory=dict)
    kernels: dict[str, Path] = field(default_factory=dict)


def write_nkibench(root: Path, problems: Iterable[FixtureProblem]) -> Written:
    for sub in ("seeds", "reference", "kernels"):
        (root / sub).mkdir(parents=True, exist_ok=True)
    summary: dict[str, object] = {}
    out = Written(root)
    for p in problems:
        stem = p.name + "_" + "_".join(f"{k}{v}" for k, v in p.values.items())
        ref = root / "reference" / f"{stem}_numpy_1.py"
        ker = root / "kernels" / f"{stem}_0.py"
        ref.write_text(_reference(p))
        ker.write_text(p.kernel or STUB_KERNEL)
        (root / "seeds" / f"{p.name}.yaml").write_text(_seed(p))
        impls = [{"task": f"./reference/{ref.name}", "kernel": f"./kernels/{ker.name}"}] * (1 + p.extra_impls)
        summary[p.name] = {
            "seed": f"./seeds/{p.name}.yaml",
            "cases": {p.case_id: {"values": dict(p.values), "impls": impls}},
        }
        out.references[p.name], out.kernels[p.name] = ref, ker
    (root / "summary.json").write_text(json.dumps(summary, indent=4))
    return out
