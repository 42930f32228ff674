"""`neuronxcc.nki` in the emulator: `@nki.jit` kernels, tracing them into a `Program`
(`compile_kernel`) and running them in-process (`simulate_kernel`, for tests and users;
the agent runs the two steps in separate sandboxed processes)."""

from __future__ import annotations

import ast
import builtins
import functools
import inspect
import textwrap
from collections.abc import Callable, Sequence
from typing import Any, cast

import msgspec
import numpy as np

from hardware_agents.neuron.emulator import dtypes, ops  # noqa: F401  (ops installs View's operators)
from hardware_agents.neuron.emulator import tracer as tr
from hardware_agents.neuron.emulator.errors import NKICompileError, NotEmulated
from hardware_agents.neuron.emulator.program import Program
from hardware_agents.neuron.emulator.tracer import View


class ArgSpec(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """One kernel argument as the compiler sees it: an HBM tensor's shape and dtype, or a scalar."""

    shape: list[int] | None = None
    dtype: str = "float32"
    scalar: float | int | bool | None = None

    @classmethod
    def of(cls, value: Any) -> ArgSpec:
        if isinstance(value, np.ndarray):
            return cls(shape=[int(s) for s in value.shape], dtype=dtypes.canon(value.dtype))
        if isinstance(value, np.generic):
            value = value.item()
        if isinstance(value, bool | int | float):
            return cls(scalar=value)
        raise NKICompileError(
            "err_invalid_argument",
            f"a kernel argument of type {type(value).__name__} is neither an array nor a scalar",
        )


class Kernel:
    """What `@nki.jit` returns: called inside a kernel it is inlined; called outside it is
    compiled and run in-process (`simulate_kernel`)."""

    def __init__(self, fn: Callable[..., Any], **options: Any) -> None:
        self.fn = fn
        self.options = options
        functools.update_wrapper(self, fn)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if tr.active():
            return self.fn(*args, **kwargs)
        if kwargs:
            raise NotEmulated("keyword arguments to a kernel launch")
        return simulate_kernel(self, *args)

    def __getitem__(self, grid: Any) -> Any:
        raise NotEmulated("SPMD launch grids (kernel[grid](...))")


def jit(fn: Callable[..., Any] | None = None, **options: Any) -> Any:
    if fn is None:
        return lambda f: Kernel(f, **options)
    return fn if isinstance(fn, Kernel) else Kernel(fn, **options)


trace = jit


def _function(kernel: Any) -> Callable[..., Any]:
    while isinstance(kernel, Kernel):
        kernel = kernel.fn
    if not callable(kernel):
        raise NKICompileError("err_invalid_kernel", f"{kernel!r} is not a kernel function")
    return kernel


_SEQUENTIAL = "__nki_python_range__"


class _RangeLoops(ast.NodeTransformer):
    """`for i in range(...)` -> a sequential loop, as the NKI compiler reads a kernel ("any use
    of Python range(...) will be replaced with sequential_range(...)", nki.language.sequential_range);
    comprehensions and other uses of `range` stay Python (they build Python values)."""

    def __init__(self) -> None:
        self.changed = False

    def visit_For(self, node: ast.For) -> ast.AST:
        self.generic_visit(node)
        it = node.iter
        if isinstance(it, ast.Call) and isinstance(it.func, ast.Name) and it.func.id == "range":
            it.func = ast.copy_location(ast.Name(id=_SEQUENTIAL, ctx=ast.Load()), it.func)
            self.changed = True
        return node


def _python_range(*args: Any) -> Any:
    from hardware_agents.neuron.emulator import language

    if not tr.active():
        return range(*args)
    return language.sequential_range(*args)


def _with_sequential_ranges(fn: Callable[..., Any]) -> Callable[..., Any]:
    """The kernel function with its Python `range` loops compiled as `nl.sequential_range` (the
    function itself where its source is not available, or it is a closure)."""
    if fn.__code__.co_freevars or fn.__globals__.get("range", builtins.range) is not builtins.range:
        return fn
    try:
        lines, first = inspect.getsourcelines(fn)
        tree = ast.parse(textwrap.dedent("".join(lines)))
    except (OSError, TypeError, SyntaxError, IndentationError):
        return fn
    node = tree.body[0] if tree.body else None
    if not isinstance(node, ast.FunctionDef) or node.name != fn.__name__:
        return fn
    node.decorator_list = []
    loops = _RangeLoops()
    loops.visit(node)
    if not loops.changed:
        return fn
    ast.increment_lineno(tree, first - 1)
    code = compile(tree, fn.__code__.co_filename, "exec")
    fn.__globals__.setdefault(_SEQUENTIAL, _python_range)
    scope: dict[str, Any] = {}
    exec(code, fn.__globals__, scope)
    new = scope[fn.__name__]
    new.__defaults__, new.__kwdefaults__ = fn.__defaults__, fn.__kwdefaults__
    return cast(Callable[..., Any], new)


def compile_kernel(kernel: Any, specs: Sequence[ArgSpec]) -> Program:
    """Trace `kernel` on arguments of these shapes (no data): the emulator's compile step."""
    fn = _with_sequential_ranges(_function(kernel))
    t = tr.Trace(getattr(fn, "__name__", "kernel"))
    try:
        names = list(inspect.signature(fn).parameters)
    except (TypeError, ValueError):
        names = []
    tr.push(t)
    try:
        args: list[Any] = []
        ids: list[int] = []
        scalars: list[Any] = []
        for i, spec in enumerate(specs):
            if spec.shape is None:
                args.append(spec.scalar)
                ids.append(-1)
                scalars.append(spec.scalar)
                continue
            name = names[i] if i < len(names) else f"arg{i}"
            tid = t.new_tensor(tuple(spec.shape), spec.dtype, "input", name=name)
            t.inputs.add(tid)
            args.append(View.full(tid))
            ids.append(tid)
            scalars.append(None)
        with np.errstate(all="ignore"):
            out = fn(*args)
        t.check()
        outs = list(out) if isinstance(out, tuple | list) else [out]
        if out is None or not outs:
            raise NKICompileError(
                "err_tensor_output_not_written_to",
                "the kernel returns no output (return the nl.shared_hbm tensors it wrote)",
            )
        out_ids = []
        for o in outs:
            if (
                not isinstance(o, View)
                or o.decl["buffer"] not in ("shared_hbm", "hbm", "input")
                or not o._is_full()
            ):
                raise NKICompileError(
                    "err_invalid_kernel_output",
                    f"a kernel returns whole HBM tensors (nl.shared_hbm), not {o!r}",
                )
            out_ids.append(o.tid)
        prog = t.program(ids, scalars, out_ids, isinstance(out, tuple | list))
    finally:
        tr.pop()
    from hardware_agents.neuron.emulator.analysis import analyze

    analyze(prog)  # on-chip memory the compiler cannot allocate (PSUM) is a compile error
    return prog


def simulate_kernel(kernel: Any, *args: Any) -> Any:
    """Compile and run a kernel on numpy arrays in this process; returns its output(s)."""
    from hardware_agents.neuron.emulator.execute import execute

    specs = [ArgSpec.of(a) for a in args]
    prog = compile_kernel(kernel, specs)
    outs = execute(prog, [a if isinstance(a, np.ndarray) else None for a in args])
    return tuple(outs) if prog.returned_tuple else outs[0]


def simulate(kernel: Any) -> Callable[..., Any]:
    return lambda *a: simulate_kernel(kernel, *a)


def baremetal(kernel: Any = None, **kwargs: Any) -> Any:
    """Without a device, `nki.baremetal` runs the kernel in the emulator."""
    if kernel is None:
        return lambda k: baremetal(k, **kwargs)
    return simulate(kernel)


def benchmark(*args: Any, **kwargs: Any) -> Any:
    raise NotEmulated(
        "nki.benchmark", "the emulator has no device to time; AccelOpt estimates latency from the program"
    )


def profile(*args: Any, **kwargs: Any) -> Any:
    raise NotEmulated("nki.profile")


__all__ = [
    "ArgSpec",
    "Kernel",
    "baremetal",
    "benchmark",
    "compile_kernel",
    "jit",
    "profile",
    "simulate",
    "simulate_kernel",
    "trace",
]
