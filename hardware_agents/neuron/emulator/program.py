"""The compiled form of an NKI kernel: what tracing the kernel produces, what the executor
runs and what the cost model prices. Plain msgspec data (no code), so it crosses process
boundaries: the sandboxed child that runs the kernel's Python only ever hands over a
`Program`, which the trusted side validates (`validate.py`) before it is executed or priced.

Layout: `tensors` (every HBM, SBUF and PSUM tensor and temporary), `body` (a tree of
`Loop`s over `Instr`uctions and `Alloc`ations). An `Access` names a tensor and, per
dimension, an affine index (`Idx`) over the loop counters of the enclosing loops and the
axes of the instruction's tile; on-chip tensors keep their block dimensions (those before
the partition dimension) in `block`, indexed by loop counters only.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from typing import Any

import msgspec

Term = tuple[int, int]  # (loop id or tile axis, coefficient)

# the ALU operators whose result is a truth value (1.0 or 0.0); logical ones read 0 as false
COMPARISONS = ("equal", "not_equal", "greater", "greater_equal", "less", "less_equal")
LOGICAL = ("logical_and", "logical_or", "logical_xor")


class Idx(msgspec.Struct, array_like=True, frozen=True):
    c: int
    loops: list[Term] = []
    axes: list[Term] = []


class Access(msgspec.Struct, array_like=True, frozen=True):
    tensor: int
    block: list[Idx]  # block dimensions (on-chip tensors): loops only
    dims: list[Idx]  # the remaining dimensions (partition first for on-chip tensors)
    shape: list[int]  # the tile


class Instr(msgspec.Struct, tag="i", array_like=True, frozen=True):
    op: str
    engine: str  # "pe", "act", "dve", "pool", "dma", or "any:<engines>" (the compiler's choice)
    dst: Access | None
    srcs: list[Access]
    roles: list[str]  # what each source is ("data", "bias", "scale", "operand0", ...)
    args: dict[str, Any] = {}
    mask: list[Idx] = []  # conjunction of `term >= 0` over the tile of `mask_shape`
    mask_shape: list[int] = []
    acc: bool = False  # accumulate into dst (`+=`) instead of overwriting it
    line: int = 0  # kernel source line


class Loop(msgspec.Struct, tag="l", array_like=True, frozen=True):
    var: int
    trip: int
    kind: str  # "affine" or "sequential"
    body: list[Node]


class Alloc(msgspec.Struct, tag="a", array_like=True, frozen=True):
    """(Re)allocates a tensor: top-level tensors once, tensors declared in a loop body once per
    iteration (fresh memory: zeros / fill value / garbage, as declared)."""

    tensor: int


Node = Instr | Loop | Alloc


class TensorDecl(msgspec.Struct, kw_only=True, frozen=True):
    id: int
    name: str
    shape: list[int]
    dtype: str
    buffer: str  # "input", "shared_hbm", "hbm", "sbuf", "psum", "const"
    par_axis: int = -1  # on-chip: index of the partition dimension (the dimensions before it are blocks)
    init: str = ""  # "" (garbage), "zeros", "fill", "const"
    fill: float = 0.0
    const: int = -1  # index into Program.constants
    scope: int = -1  # the loop whose body declared it (-1: the kernel body)
    temp: bool = False  # an instruction's result that no name refers to
    alias: int = -1  # an HBM tensor reshaped: the tensor whose memory this one views


class Constant(msgspec.Struct, array_like=True, frozen=True):
    dtype: str
    shape: list[int]
    data: bytes


class Program(msgspec.Struct, kw_only=True):
    kernel: str
    tensors: list[TensorDecl]
    body: list[Node]
    args: list[int] = []  # per kernel argument: its input tensor id, or -1 for a scalar
    scalars: list[float | int | bool | None] = []
    outputs: list[int] = []
    returned_tuple: bool = False
    constants: list[Constant] = []
    loop_trips: dict[int, int] = {}
    # `sources_digest` of the kernel's files as the tracing child found them before any of
    # their code ran: the trusted side prices and executes a program only for the source it
    # asked about (a program copied from another profile carries that profile's digest)
    source_sha256: str = ""

    def tensor(self, tid: int) -> TensorDecl:
        return self.tensors[tid]


def sources_digest(files: Iterable[tuple[str, bytes]]) -> str:
    """SHA-256 over a kernel's files (relative path and content, in path order)."""
    h = hashlib.sha256()
    for path, content in sorted(files):
        for part in (path.encode(), content):
            h.update(len(part).to_bytes(8, "little"))
            h.update(part)
    return h.hexdigest()


def encode(program: Program) -> bytes:
    return msgspec.msgpack.encode(program)


def decode(data: bytes) -> Program:
    return msgspec.msgpack.decode(data, type=Program)


__all__ = [
    "Access",
    "Alloc",
    "Constant",
    "Idx",
    "Instr",
    "Loop",
    "Node",
    "Program",
    "TensorDecl",
    "decode",
    "encode",
    "sources_digest",
]
