"""Between a FlashInfer-Bench trace set and our suites of problems.

Import (`problems_from`): one problem per definition that has workloads. FlashInfer-Bench
keeps many workloads per definition; a problem is one definition at one workload, so:

- the problem's workload is the largest one (by input elements; `workload="smallest"`,
  `"first"` or a uuid choose otherwise): what the GPU times and the roofline describes;
- its `check_workloads` are the `checks` smallest others no larger than it: correctness
  is checked there too, and they are all the Triton interpreter runs on a host without a
  GPU (so with `workload="smallest"` the interpreter checks the smallest workload itself);
- the baseline is the solution of `baseline_author` (Triton, else Python, else C or NKI,
  which our exports keep under `x_solutions/`), else any such solution in that order, else
  the definition's PyTorch reference itself as a value-returning Python solution;
  CUDA/C++/TileLang solutions are skipped with a note;
- safetensors inputs must be present (a missing file or a Git LFS pointer is an error
  naming the file, unless `skip_missing_blobs`, which drops those workloads with a note);
  they are referenced by absolute path and copied into the problem folder when written.

Export (`trace_set_from_problems`): definitions, every workload of a problem (its own and
its check workloads), baselines (C and NKI ones under `x_solutions/`, noted) and any
traces (`suites.flashinfer.traces.to_trace`). Inputs our Triton input generator
synthesizes at run time (paged-attention `*_indptr`, `*_indices`, `*_last_page_len`) are
written as safetensors blobs (seed 0) so FlashInfer-Bench runs the same kind of data;
the workload keeps ours under `x_inputs` and re-imports unchanged.
"""

from __future__ import annotations

import math
import shutil
import sys
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

import msgspec

import suites
from accelopt.problem import (
    AxisConst,
    BuildSpec,
    Definition,
    ExpressionError,
    Problem,
    ProblemFileError,
    SafetensorsInput,
    Solution,
    SourceFile,
    Trace,
    Workload,
    eval_expression,
    to_json,
)
from suites.flashinfer.ragged import MIN_SEQUENCES, covers_batches, ragged_check_workloads
from suites.flashinfer.ragged import describe as describe_ragged
from suites.flashinfer.recorded import Recorded, write_recorded
from suites.flashinfer.traceset import FlashInferImportError, TraceSet, synthesized_inputs


def interpretable_elements(device: str) -> int:
    """Input elements the device-less check of `device`'s family (the Triton interpreter on a
    host without a GPU) handles in seconds to a minute: its descriptor's
    `Capabilities.interpretable_elements`; check workloads are sized under it (no bound: the
    family checks every workload on the device). FlashInferImportError for a kind that does
    not run Triton kernels."""
    from hardware_agents.families import family_of, kinds_running, unknown_kind

    family = family_of(device)
    if family is None:
        raise FlashInferImportError(unknown_kind(device))
    runs = family.language_names()  # None: any language
    if runs is not None and "triton" not in runs:
        raise FlashInferImportError(
            f"device kind {device!r} does not run Triton kernels; kinds that do: {', '.join(kinds_running('triton'))}"
        )
    bound = family.capabilities.interpretable_elements
    return bound if bound is not None else sys.maxsize


def workload_elements(d: Definition, w: Workload) -> int:
    axes = {k: a.value for k, a in d.axes.items() if isinstance(a, AxisConst)} | dict(w.axes)
    total = 0
    for spec in d.inputs.values():
        if spec.shape is not None:
            total += math.prod(int(axes.get(a, 0)) for a in spec.shape)
    return total


def _blob_status(root: Path, w: Workload) -> str | None:
    """None if every safetensors file of the workload is present, else why not."""
    for name, spec in w.inputs.items():
        if not isinstance(spec, SafetensorsInput):
            continue
        p = Path(spec.path) if Path(spec.path).is_absolute() else root / spec.path
        if not p.is_file():
            return f"input {name}: safetensors file {p} is missing"
        with open(p, "rb") as f:
            if f.read(64).startswith(b"version https://git-lfs"):
                return f"input {name}: {p} is a Git LFS pointer (run `git lfs pull --include {spec.path}`)"
    return None


def _missing_blob_inputs(root: Path, w: Workload) -> list[str]:
    """Inputs whose safetensors file is missing (or a Git LFS pointer)."""
    out = []
    for name, spec in w.inputs.items():
        if isinstance(spec, SafetensorsInput):
            p = Path(spec.path) if Path(spec.path).is_absolute() else root / spec.path
            if not p.is_file():
                out.append(name)
            else:
                with open(p, "rb") as f:
                    if f.read(64).startswith(b"version https://git-lfs"):
                        out.append(name)
    return out


def _random_range(d: Definition, name: str) -> str | None:
    """What the input generator draws for an input with no data (the definition's
    `x_input_init`, else the default for its dtype); None for an integer input the definition
    gives no range for (any integers would be no valid value: expert ids, offsets...)."""
    from hardware_agents.index_inputs import is_float
    from hardware_agents.pipeline import inputgen

    spec = d.inputs[name]
    if name in d.x_input_init:
        return d.x_input_init[name]
    if is_float(spec.dtype):
        fp8 = " (clamped to the fp8 range)" if spec.dtype.startswith("float8") else ""
        return f"{inputgen.DEFAULT_INIT}{fp8}"
    if spec.dtype == "bool":
        return "randint(0, 2)"
    return None


def _synthesize_missing(
    d: Definition, root: Path, w: Workload, *, indices: bool, everything: bool
) -> tuple[Workload, list[str]] | str:
    """The workload with its missing blobs dropped, so that the input generator produces those
    inputs (index inputs: `synthesized_inputs`, valid indices; with `everything`, any other
    input too, at random in the range the definition allows: `_random_range`), and their
    names; else why not."""
    missing = _missing_blob_inputs(root, w)
    index = set(synthesized_inputs(d))
    others = [n for n in missing if n not in index]
    if others and not everything:
        return f"input(s) {', '.join(others)} are not index inputs"
    if not indices and not everything:
        return "not asked to synthesize"
    rangeless = [n for n in others if _random_range(d, n) is None]
    if rangeless:
        return (
            f"integer input(s) {', '.join(rangeless)} have no value range in the definition "
            "(x_input_init), so no valid values can be drawn"
        )
    kept = {n: s for n, s in w.inputs.items() if n not in missing}
    return msgspec.structs.replace(w, inputs=kept), missing


def _synthesis_note(d: Definition, names: set[str]) -> str:
    """What was drawn in place of the missing blobs (never the recorded data)."""
    index = set(synthesized_inputs(d))
    parts = []
    idx = sorted(names & index)
    if idx:
        parts.append(
            f"index inputs {', '.join(idx)} synthesized (their blobs are missing): valid indices "
            "drawn per seed, within the definition's constraints and semantics"
        )
    parts += [
        f"input {n} ({d.inputs[n].dtype}) synthesized at random (its blob is missing): {_random_range(d, n)}"
        for n in sorted(names - index)
    ]
    return f"{d.name}: " + "; ".join(parts) + "; not the recorded data"


def derived_check_workloads(
    d: Definition,
    main: Workload,
    count: int,
    targets: Sequence[int] = (1 << 15, 1 << 12),
    *,
    max_elements: int,
) -> list[Workload]:
    """Small workloads of the definition for correctness checks, derived from its variable
    axes when the folder has none smaller than the problem's: every variable axis scaled
    down by one factor (none below 2, or its own value if smaller) until the inputs hold at
    most `target` elements, then the axis equalities of its constraints (`len_indptr ==
    batch_size + 1`) applied; scalars are kept, index inputs left to the generator.
    Workloads that are not smaller, break a constraint, or stay above `max_elements`
    (`interpretable_elements`; a large constant part: a GEMM's weight) are left out."""
    var = [a for a, spec in d.axes.items() if not isinstance(spec, AxisConst) and a in main.axes]
    if not var or any(
        isinstance(s, SafetensorsInput) and n not in synthesized_inputs(d) for n, s in main.inputs.items()
    ):
        return []
    size = workload_elements(d, main)
    out: list[Workload] = []
    seen = {tuple(sorted(main.axes.items()))}
    for i, target in enumerate(targets):
        if len(out) >= count:
            break
        axes = _scaled_axes(d, main, target)
        w = Workload(
            uuid=f"{main.uuid}-x-small-{i + 1}",
            axes=axes,
            inputs={n: s for n, s in main.inputs.items() if not isinstance(s, SafetensorsInput)},
            x_label=f"derived-{i + 1}",
        )
        key = tuple(sorted(axes.items()))
        elements = workload_elements(d, w)
        if key in seen or elements >= size or elements > max_elements or not _axes_consistent(d, axes):
            continue
        seen.add(key)
        out.append(w)
    return out


def _scaled_axes(d: Definition, main: Workload, target: int) -> dict[str, int]:
    """The workload's axes with every variable axis scaled down by one factor (none below 2, or
    its own value if smaller) until the inputs hold at most `target` elements, then the axis
    equalities of the constraints applied."""
    var = [a for a, spec in d.axes.items() if not isinstance(spec, AxisConst) and a in main.axes]
    f = 1.0
    axes = dict(main.axes)
    while f > 1e-9:
        axes = {a: (max(min(v, 2), int(v * f)) if a in var else v) for a, v in main.axes.items()}
        axes = _apply_axis_equalities(d, axes)
        if workload_elements(d, msgspec.structs.replace(main, axes=axes)) <= target:
            break
        f /= 2
    return axes


def _ragged_checks(d: Definition, main: Workload, count: int, max_elements: int) -> list[Workload]:
    """Structured check workloads of a paged/ragged definition (`ragged.ragged_check_workloads`)
    that satisfy its constraints and the interpreter's size; none where a non-index input is
    recorded data (its shape is the workload's)."""
    if any(
        isinstance(s, SafetensorsInput) and n not in synthesized_inputs(d) for n, s in main.inputs.items()
    ):
        return []
    base = _scaled_axes(d, main, 1 << 12)
    return [
        w
        for w in ragged_check_workloads(d, main, base, count)
        if _axes_consistent(d, w.axes) and workload_elements(d, w) <= max_elements
    ]


def _axis_equalities(d: Definition) -> list[tuple[str, str]]:
    """(axis, expression) for constraints of the form `axis == expression of axes`."""
    out = []
    for c in d.constraints or []:
        lhs, sep, rhs = c.partition("==")
        lhs, rhs = lhs.strip(), rhs.strip()
        if sep and lhs in d.axes and "[" not in rhs and "." not in rhs:
            out.append((lhs, rhs))
    return out


def _apply_axis_equalities(d: Definition, axes: dict[str, int]) -> dict[str, int]:
    out = dict(axes)
    for axis, expr in _axis_equalities(d):
        try:
            out[axis] = int(eval_expression(expr, out))
        except (ExpressionError, ValueError):
            continue
    return out


def _axes_consistent(d: Definition, axes: dict[str, int]) -> bool:
    for axis, expr in _axis_equalities(d):
        try:
            if axes.get(axis) != int(eval_expression(expr, axes)):
                return False
        except (ExpressionError, ValueError):
            continue
    return all(v >= 1 for v in axes.values())


def _absolute_blobs(root: Path, w: Workload) -> Workload:
    inputs = {
        n: msgspec.structs.replace(s, path=str((root / s.path).resolve()))
        if isinstance(s, SafetensorsInput) and not Path(s.path).is_absolute()
        else s
        for n, s in w.inputs.items()
    }
    return msgspec.structs.replace(w, inputs=inputs)


def reference_solution(d: Definition) -> Solution:
    """The definition's PyTorch reference as a (value-returning) Python solution."""
    return Solution(
        name=f"{d.name}_reference",
        definition=d.name,
        author="reference",
        spec=BuildSpec(
            language="python",
            target_hardware=["cuda"],
            entry_point="main.py::run",
            destination_passing_style=False,
        ),
        sources=[SourceFile(path="main.py", content=d.reference)],
        description="the definition's PyTorch reference, as the starting point",
    )


_BASELINE_LANGUAGES = ("triton", "python", "c", "nki")


def choose_baseline(ts: TraceSet, d: Definition, baseline_author: str) -> Solution:
    """The solution of `baseline_author`, else one the folder's traces evaluated (a published
    folder traces its baselines), then by language and name."""
    sols = [s for s in ts.solutions.values() if s.definition == d.name]
    traced = {t.solution for t in ts.traces if t.definition == d.name and t.solution}
    for s in sols:
        if s.spec.language not in _BASELINE_LANGUAGES:
            ts.notes.append(
                f"{d.name}: solution {s.name} ({s.spec.language}) not usable as a baseline by the "
                "Triton agent"
            )
    ranked = sorted(
        (s for s in sols if s.spec.language in _BASELINE_LANGUAGES),
        key=lambda s: (
            s.author != baseline_author,
            s.name not in traced,
            _BASELINE_LANGUAGES.index(s.spec.language),
            s.name,
        ),
    )
    return ranked[0] if ranked else reference_solution(d)


def _usable_workloads(
    ts: TraceSet,
    d: Definition,
    root: Path,
    skip_missing_blobs: bool,
    synthesize_indices: bool,
    synthesize_missing: bool,
) -> tuple[list[Workload], set[str]]:
    """The definition's workloads with their blobs resolved (or the missing ones left to the
    input generator, when asked) and the names of the inputs synthesized; a workload whose
    blobs are missing is dropped (noted) with `skip_missing_blobs`, else an error naming the
    options."""
    usable: list[Workload] = []
    synthesized: set[str] = set()
    for w in ts.workloads.get(d.name, []):
        why = _blob_status(root, w)
        if why is None:
            usable.append(_absolute_blobs(root, w))
            continue
        fixed = _synthesize_missing(d, root, w, indices=synthesize_indices, everything=synthesize_missing)
        if not isinstance(fixed, str):
            usable.append(_absolute_blobs(root, fixed[0]))
            synthesized.update(fixed[1])
        elif skip_missing_blobs:
            asked = synthesize_indices or synthesize_missing
            ts.notes.append(f"{d.name}: workload {w.uuid} skipped: {why}" + (f" ({fixed})" if asked else ""))
        else:
            index_only = set(_missing_blob_inputs(root, w)) <= set(synthesized_inputs(d))
            hint = (
                "pass --synthesize-indices to synthesize the index inputs, "
                if index_only
                else f"{fixed}: pass --synthesize-missing to draw them at random (noted per input), "
            )
            raise FlashInferImportError(
                f"{d.name}: workload {w.uuid}: {why} ({hint}or --skip-missing-blobs to drop such workloads)"
            )
    return usable, synthesized


def problems_from(
    ts: TraceSet,
    *,
    workload: str = "largest",
    checks: int = 2,
    baseline_author: str = "baseline",
    skip_missing_blobs: bool = False,
    synthesize_indices: bool = False,
    synthesize_missing: bool = False,
    derive_checks: bool = True,
    definitions: Iterable[str] | None = None,
    device: str = "h100",
) -> list[Problem]:
    """One Problem per definition with usable workloads (notes go to `ts.notes`).

    A workload whose index blobs (`*_indptr`, `*_indices`, ...) are missing is an error,
    unless `synthesize_indices` (those inputs are then synthesized by the input generator,
    noted) or `skip_missing_blobs` (the workload is dropped, noted). A definition with fewer
    than `checks` workloads smaller than its problem's gets small ones derived from its
    variable axes (`derived_check_workloads`, noted) when its problem's workload is too large
    for the interpreter (more than `interpretable_elements(device)` input elements: `device`
    is the kind the suite targets), unless `derive_checks` is off."""
    max_elements = interpretable_elements(device)
    root = ts.root or Path(".")
    wanted = set(definitions) if definitions is not None else None
    if wanted is not None and not wanted <= set(ts.definitions):
        raise FlashInferImportError(
            f"no definition named {', '.join(sorted(wanted - set(ts.definitions)))}; the "
            f"folder has: {', '.join(sorted(ts.definitions)) or 'none'}"
        )
    out = []
    for name, d in ts.definitions.items():
        if wanted is not None and name not in wanted:
            continue
        if any(s.dtype == "float4_e2m1" for s in (*d.inputs.values(), *d.outputs.values())):
            ts.notes.append(f"{name}: skipped (float4_e2m1 tensors are not supported by the Triton agent)")
            continue
        usable, synthesized = _usable_workloads(
            ts, d, root, skip_missing_blobs, synthesize_indices, synthesize_missing
        )
        if synthesized:
            ts.notes.append(_synthesis_note(d, synthesized))
        if not usable:
            ts.notes.append(f"{name}: skipped (no workloads)")
            continue
        by_size = sorted(usable, key=lambda w: (workload_elements(d, w), w.uuid))
        main = _main_workload(usable, by_size, workload)
        if main is None:
            ts.notes.append(f"{name}: skipped (no workload {workload})")
            continue
        small = _check_workloads(
            ts, name, d, usable, by_size, main, checks, workload, derive_checks, max_elements
        )
        out.append(
            Problem(
                definition=d,
                workload=main,
                baseline=choose_baseline(ts, d, baseline_author),
                check_workloads=small,
            )
        )
    return out


def _main_workload(usable: list[Workload], by_size: list[Workload], workload: str) -> Workload | None:
    """The problem's workload: the largest, the smallest, the first in the file, or the one of
    uuid `workload` (None: there is none)."""
    if workload == "largest":
        return by_size[-1]
    if workload == "smallest":
        return by_size[0]
    if workload == "first":
        return usable[0]
    return next((w for w in usable if w.uuid == workload), None)


def _check_workloads(
    ts: TraceSet,
    name: str,
    d: Definition,
    usable: list[Workload],
    by_size: list[Workload],
    main: Workload,
    checks: int,
    workload: str,
    derive_checks: bool,
    max_elements: int,
) -> list[Workload]:
    """Up to `checks` of the folder's workloads no larger than `main` (in the file's order),
    plus derived ones where they do not cover the batch and ragged structure or where `main`
    is too large for the interpreter (see `problems_from`); what was derived goes to `ts.notes`."""
    size = workload_elements(d, main)
    chosen = {w.uuid for w in by_size if w.uuid != main.uuid and workload_elements(d, w) <= size}
    picked = [w.uuid for w in by_size if w.uuid in chosen][: max(0, checks)]
    small = [w for w in usable if w.uuid in picked]  # in the file's order
    interpreted = small or ([main] if size <= max_elements else [])  # what a CPU host checks
    if derive_checks and not covers_batches(d, interpreted):
        ragged = _ragged_checks(d, main, max(1, checks - len(small)), max_elements)
        if ragged:
            small += ragged
            ts.notes.append(
                f"{name}: {len(ragged)} check workload(s) derived to cover its batch and ragged structure "
                f"({'; '.join(f'{describe_axes(w.axes)}: {describe_ragged(d, w)}' for w in ragged)}): "
                f"the folder has none with {MIN_SEQUENCES} or more sequences of synthesized indices"
            )
    if derive_checks and len(small) < checks and workload != "smallest" and size > max_elements:
        derived = derived_check_workloads(d, main, checks - len(small), max_elements=max_elements)
        if derived:
            small += derived
            ts.notes.append(
                f"{name}: {len(derived)} small check workload(s) derived from its variable axes "
                f"({'; '.join(describe_axes(w.axes) for w in derived)}): the folder has "
                f"{len(picked)} smaller than the problem's"
            )
        elif not small:
            ts.notes.append(
                f"{name}: no check workloads (the folder has none smaller, and scaling its variable "
                f"axes down leaves more than {max_elements:,} input elements): a host "
                "without a GPU would check it at the problem's own workload in the interpreter; "
                "profile it on a GPU"
            )
    return small


def describe_axes(axes: dict[str, int]) -> str:
    return " ".join(f"{k}={v}" for k, v in axes.items())


# --- our suite folders -----------------------------------------------------------------------


def _localize(w: Workload, folder: Path) -> Workload:
    """Copy the workload's blobs into `folder/blob/` and reference them relative to `folder`."""
    inputs = {}
    for n, s in w.inputs.items():
        if isinstance(s, SafetensorsInput) and Path(s.path).is_absolute():
            rel = Path("blob") / Path(s.path).name
            (folder / rel).parent.mkdir(parents=True, exist_ok=True)
            if Path(s.path).resolve() != (folder / rel).resolve():
                shutil.copyfile(s.path, folder / rel)
            s = msgspec.structs.replace(s, path=str(rel))
        inputs[n] = s
    return msgspec.structs.replace(w, inputs=inputs)


def write_suite(
    problems: Sequence[Problem],
    out: str | Path,
    *,
    name: str,
    device: str = "h100",
    description: str = "imported from a FlashInfer-Bench trace set",
    overwrite: bool = False,
    recorded: Mapping[str, Recorded] | None = None,
) -> Path:
    """A suite folder (suite.json + one folder per problem) that `suites.load_suite` loads
    (by path, or by name under the user suite dir). An existing suite there is replaced only
    with `overwrite`. `recorded` (problem name -> the folder's traces and other solutions of
    it) is kept beside each problem for the export (`suites.flashinfer.recorded`)."""
    dest = Path(out)
    if (dest / "suite.json").exists():
        if not overwrite:
            raise FlashInferImportError(
                f"{dest} already holds a suite; pass overwrite (--force) to replace it"
            )
        shutil.rmtree(dest)
    dest.mkdir(parents=True, exist_ok=True)
    info = suites.SuiteInfo(
        name=name, description=description, device=device, language="triton", entry_point="main.py::run"
    )
    (dest / "suite.json").write_bytes(to_json(info) + b"\n")
    for p in problems:
        folder = dest / p.definition.name
        folder.mkdir(exist_ok=True)
        (folder / "definition.json").write_bytes(to_json(p.definition) + b"\n")
        (folder / "workload.json").write_bytes(to_json(_localize(p.workload, folder)) + b"\n")
        lines = [msgspec.json.encode(_localize(w, folder)) for w in p.check_workloads]
        (folder / "check_workloads.jsonl").write_bytes(b"".join(line + b"\n" for line in lines))
        (folder / "solution.json").write_bytes(to_json(p.baseline) + b"\n")
        if recorded and p.name in recorded:
            write_recorded(folder, recorded[p.name])
    return dest


def load_suite_dir(path: str | Path) -> list[Problem]:
    """The problems of a suite: a folder anywhere, or a suite name."""
    try:
        return suites.load_suite(str(path))
    except KeyError as e:
        raise ProblemFileError(str(e.args[0]) if e.args else str(e)) from None


# --- export ----------------------------------------------------------------------------------


def _relative_blobs(w: Workload, d: Definition, dest_root: Path, ts: TraceSet) -> Workload:
    inputs = {}
    for n, s in w.inputs.items():
        if isinstance(s, SafetensorsInput) and Path(s.path).is_absolute():
            rel = Path("blob") / "workloads" / d.op_type / d.name / Path(s.path).name
            if Path(s.path).is_file():
                (dest_root / rel).parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(s.path, dest_root / rel)
            else:
                ts.notes.append(f"{d.name}: blob {s.path} missing, not copied")
            s = msgspec.structs.replace(s, path=str(rel))
        inputs[n] = s
    return msgspec.structs.replace(w, inputs=inputs)


def _synthesized_blob(d: Definition, w: Workload, dest_root: Path, ts: TraceSet) -> None:
    """Write the inputs our generator synthesizes (and the workload does not give) as one
    safetensors blob and record them as the workload's FlashInfer-Bench inputs."""
    from hardware_agents.index_inputs import axis_values, synthesized_arrays

    names = [n for n in synthesized_inputs(d) if n not in w.inputs]
    if not names:
        return
    import safetensors.numpy

    arrays = synthesized_arrays(d, axis_values(d, w), 0)
    rel = Path("blob") / "workloads" / d.op_type / d.name / f"{d.name}_{w.uuid}_x_synth.safetensors"
    (dest_root / rel).parent.mkdir(parents=True, exist_ok=True)
    safetensors.numpy.save_file({n: arrays[n] for n in names}, str(dest_root / rel))
    fib = dict(w.inputs)
    for n in names:
        fib[n] = SafetensorsInput(path=str(rel), tensor_key=n)
    ts.fib_inputs[(d.name, w.uuid)] = fib


def trace_set_from_problems(
    problems: Sequence[Problem],
    out: str | Path | None = None,
    *,
    traces: Iterable[tuple[Solution, Trace]] = (),
    author: str | None = None,
    solutions: Iterable[Solution] = (),
) -> TraceSet:
    """A TraceSet of the problems (and extra solutions, with their traces or without); blobs
    are copied under `out` when given."""
    ts = TraceSet()
    dest = Path(out) if out is not None else None
    for p in problems:
        d = p.definition
        if d.name not in ts.definitions:
            ts.add_definition(d)
        for w in (p.workload, *p.check_workloads):
            ts.add_workload(d.name, _relative_blobs(w, d, dest, ts) if dest is not None else w)
            if dest is not None:
                _synthesized_blob(d, w, dest, ts)
        base = p.baseline if author is None else msgspec.structs.replace(p.baseline, author=author)
        if base.name not in ts.solutions:
            ts.add_solution(base)
    for sol in solutions:
        if sol.name not in ts.solutions:
            ts.add_solution(sol)
    for sol, trace in traces:
        if sol.name not in ts.solutions:
            ts.add_solution(sol)
        ts.add_trace(trace)
    return ts


def export_problems(
    problems: Sequence[Problem],
    out: str | Path,
    *,
    traces: Iterable[tuple[Solution, Trace]] = (),
    author: str | None = None,
    solutions: Iterable[Solution] = (),
) -> TraceSet:
    """Write the problems (and traces) as a FlashInfer-Bench folder at `out`."""
    ts = trace_set_from_problems(problems, out, traces=traces, author=author, solutions=solutions)
    ts.save(out)
    return ts
