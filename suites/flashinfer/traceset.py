"""A FlashInfer-Bench trace set (TraceSet folder) read into our schema and written back.

Layout (FlashInfer-Bench `TraceSet.from_path`, which scans each folder recursively):

    definitions/<op_type>/<definition>.json
    workloads/<op_type>/<definition>.jsonl          workload-only traces, one per line
    solutions/<author>/<op_type>/<definition>/<solution>.json
    traces/<author>/<op_type>/<definition>.jsonl     evaluated traces
    blob/workloads/<op_type>/<definition>/*.safetensors

As people publish it (`folder.py`): workloads and traces may also be `.json` files of one
record each, and are read (and written back) so; a file or line we cannot read is skipped
with the reason (`TraceSet.skipped`), and of solution files that share a name one is kept.

FlashInfer-Bench's own writer (`save_json_file`, `model_dump_json(exclude_unset=True)`)
leaves out the `type` of an axis or input that was never set explicitly (`"batch": {}` is a
variable axis, `"x": {}` a random input): reading infers it (const if there is a `value`,
else var; safetensors if there is a `path`, scalar if a `value`, else random) and writing
leaves it out again where the file had none. Workload lines FlashInfer-Bench's `report
merge` writes under `traces/` are read as workloads. Solutions in languages FlashInfer-Bench
cannot hold (c, nki) go to `x_solutions/` (FlashInfer-Bench does not scan it), so a suite
of C or NKI kernels survives the trip. A workload whose inputs we synthesize at run time
(paged-attention indices) is written with FlashInfer-Bench-facing blob inputs and ours under
`x_inputs`. A solution whose file has no `destination_passing_style` gets it from its entry
function's signature (the definition's inputs only: value-returning; inputs then outputs:
destination-passing), recorded in `notes` and written explicitly from then on.

Reading keeps, for every record, the file it came from and its raw JSON, and writing
merges the raw JSON back under what our structs encode: fields we do not model (newer
FlashInfer-Bench versions, `performance.profile`, ...) and explicit defaults survive, so
read -> write reproduces a folder losslessly (equal JSON, same files, same line order).
Records we create are written in FlashInfer-Bench's canonical places. Non-finite floats
are written as the strings "NaN", "Infinity", "-Infinity" (pydantic's `ser_json_inf_nan=
"strings"`, as FlashInfer-Bench's Correctness does) and read back from them.
"""

from __future__ import annotations

import ast
import json
import math
import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import msgspec

from accelopt.problem import (
    FLASHINFER_LANGUAGES,
    Definition,
    InputSpec,
    ProblemFileError,
    SafetensorsInput,
    Solution,
    Trace,
    Workload,
    definition_errors,
    solution_errors,
    workload_errors,
)
from suites.flashinfer.folder import Record, Skipped, choose_duplicate, records

FIB_LANGUAGES = frozenset(FLASHINFER_LANGUAGES)
_NONFINITE = {
    "NaN": math.nan,
    "Infinity": math.inf,
    "-Infinity": -math.inf,
    "nan": math.nan,
    "inf": math.inf,
    "-inf": -math.inf,
}
_FLOAT_KEYS = {
    "max_relative_error",
    "max_absolute_error",
    "latency_ms",
    "reference_latency_ms",
    "speedup_factor",
    "x_pct_peak",
    "x_rel_l2",
}


class FlashInferImportError(ValueError):
    """A trace-set file that cannot be read into our schema (names the file and the reason)."""


class Origin(msgspec.Struct, frozen=True):
    path: str  # relative to the trace-set root
    raw: Any  # the record's JSON as read


def _nonfinite_in(obj: Any) -> Any:
    """Strings standing for non-finite floats at float fields -> floats (reading)."""
    if isinstance(obj, dict):
        return {
            k: (
                _NONFINITE[v]
                if k in _FLOAT_KEYS and isinstance(v, str) and v in _NONFINITE
                else _nonfinite_in(v)
            )
            for k, v in obj.items()
        }
    if isinstance(obj, list):
        return [_nonfinite_in(v) for v in obj]
    return obj


def _nonfinite_out(obj: Any) -> Any:
    """Non-finite floats -> "NaN" / "Infinity" / "-Infinity" (writing)."""
    if isinstance(obj, float) and not math.isfinite(obj):
        return "NaN" if math.isnan(obj) else ("Infinity" if obj > 0 else "-Infinity")
    if isinstance(obj, dict):
        return {k: _nonfinite_out(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_nonfinite_out(v) for v in obj]
    return obj


def merge_raw(encoded: Any, raw: Any) -> Any:
    """`encoded` with every key of `raw` it lacks put back (recursively; lists of equal length
    element by element). What we encode wins where both have a value."""
    if isinstance(encoded, dict) and isinstance(raw, dict):
        out = dict(encoded)
        for k, v in raw.items():
            out[k] = merge_raw(out[k], v) if k in out else v
        return out
    if isinstance(encoded, list) and isinstance(raw, list) and len(encoded) == len(raw):
        return [merge_raw(e, r) for e, r in zip(encoded, raw, strict=True)]
    return encoded


def _axis_tag(a: Any) -> str:
    return "const" if "value" in a else "var"


def _input_tag(i: Any) -> str:
    return "safetensors" if "path" in i else "scalar" if "value" in i else "random"


def _tagged(entries: Any, infer: Any) -> Any:
    """A dict of axes or inputs with the `type` FlashInfer-Bench's writer may leave out put in."""
    if not isinstance(entries, dict):
        return entries
    return {
        k: ({"type": infer(v), **v} if isinstance(v, dict) and "type" not in v else v)
        for k, v in entries.items()
    }


def _untag_like(out: Any, raw: Any) -> None:
    """Drop the `type` we put in where the file had none (in place, one dict of entries)."""
    if isinstance(out, dict) and isinstance(raw, dict):
        for k, v in raw.items():
            if isinstance(v, dict) and "type" not in v and isinstance(out.get(k), dict):
                out[k].pop("type", None)


def _fill_definition(raw: Any) -> Any:
    return (
        {**raw, "axes": _tagged(raw.get("axes"), _axis_tag)}
        if isinstance(raw, dict) and "axes" in raw
        else raw
    )


def _fill_line(raw: Any) -> Any:
    """A workload or trace line with its workload's input tags filled in (and `x_inputs`, ours,
    in place of FlashInfer-Bench's inputs)."""
    if not isinstance(raw, dict) or not isinstance(raw.get("workload"), dict):
        return raw
    w = dict(raw["workload"])
    if "x_inputs" in w:
        w["inputs"] = w["x_inputs"]
    if "inputs" in w:
        w["inputs"] = _tagged(w["inputs"], _input_tag)
    return {**raw, "workload": w}


def _restore_line(out: dict[str, Any], raw: Any) -> dict[str, Any]:
    """The written line as the file had it where we only inferred (tags, FlashInfer-Bench inputs,
    null solution/evaluation left out)."""
    for k in ("solution", "evaluation"):
        if isinstance(raw, dict) and k not in raw and out.get(k) is None:
            out.pop(k, None)
    w, rw = out.get("workload"), raw.get("workload") if isinstance(raw, dict) else None
    if isinstance(w, dict) and isinstance(rw, dict):
        if "x_inputs" in rw:
            w["x_inputs"], w["inputs"] = w["inputs"], rw["inputs"]
            _untag_like(w["x_inputs"], rw["x_inputs"])
        else:
            _untag_like(w.get("inputs"), rw.get("inputs"))
    return out


def synthesized_inputs(d: Definition) -> list[str]:
    """Inputs our input generators synthesize rather than draw (`hardware_agents.index_inputs`)."""
    from hardware_agents.index_inputs import synthesized_inputs as names

    return names(d)


def entry_params(source: str, symbol: str) -> tuple[int, int] | None:
    """(required, total) positional parameters of a top-level function in Python source (None:
    not found, or it takes *args)."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return None
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name == symbol:
            if node.args.vararg is not None:
                return None
            total = len(node.args.posonlyargs) + len(node.args.args)
            return total - len(node.args.defaults), total
    return None


def entry_returns_value(source: str, symbol: str) -> bool | None:
    """Whether a top-level function returns a value (a `return` with something other than
    None, outside nested functions); None when it is not found."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return None
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name == symbol:
            todo: list[ast.AST] = list(node.body)
            while todo:
                n = todo.pop()
                if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda | ast.ClassDef):
                    continue
                if (
                    isinstance(n, ast.Return)
                    and n.value is not None
                    and not (isinstance(n.value, ast.Constant) and n.value.value is None)
                ):
                    return True
                todo.extend(ast.iter_child_nodes(n))
            return False
    return None


def infer_destination_passing(s: Solution, d: Definition) -> bool | None:
    """The calling convention the entry function shows: by its signature, False when it takes
    the definition's inputs only (returns the outputs), True when it takes inputs then
    outputs; for `run(*args, **kwargs)`, by its body: False when it returns a value, True
    when it never does. None when neither tells."""
    try:
        source = s.entry_file().content
        params = entry_params(source, s.entry_symbol)
    except ProblemFileError:
        return None
    if params is None:
        returns = entry_returns_value(source, s.entry_symbol)
        return None if returns is None else not returns
    req, total = params
    returning = req <= len(d.inputs) <= total
    passing = req <= len(d.inputs) + len(d.outputs) <= total
    return None if returning == passing else passing


def _explicit_workload(data: dict[str, Any]) -> dict[str, Any]:
    """FlashInfer-Bench's Workload requires `axes` and `inputs` (our structs omit empty ones)."""
    return {
        "uuid": data["uuid"],
        "axes": data.get("axes", {}),
        "inputs": data.get("inputs", {}),
        **{k: v for k, v in data.items() if k not in ("uuid", "axes", "inputs")},
    }


def to_fib(obj: msgspec.Struct) -> Any:
    """A record as FlashInfer-Bench JSON (builtins), with the fields FlashInfer-Bench requires or
    defaults differently made explicit (workload axes/inputs, destination_passing_style)."""
    data = msgspec.to_builtins(obj)
    if isinstance(obj, Solution):
        data["spec"]["destination_passing_style"] = obj.spec.destination_passing_style
    elif isinstance(obj, Workload):
        data = _explicit_workload(data)
    elif isinstance(obj, Trace):
        data["workload"] = _explicit_workload(data["workload"])
    return _nonfinite_out(data)


def _workload_line(definition: str, w: Workload) -> dict[str, Any]:
    return {"definition": definition, "workload": to_fib(w), "solution": None, "evaluation": None}


class TraceSet:
    """Definitions, workloads, solutions and traces of one FlashInfer-Bench trace set."""

    def __init__(self, root: Path | None = None) -> None:
        self.root = root
        self.definitions: dict[str, Definition] = {}
        self.workloads: dict[str, list[Workload]] = {}
        self.solutions: dict[str, Solution] = {}
        self.traces: list[Trace] = []
        self.notes: list[str] = []
        self.skipped: list[Skipped] = []  # files (or lines) of the folder left out, and why
        self._origin: dict[tuple[str, str], Origin] = {}
        self._trace_origin: list[Origin | None] = []
        # (definition, workload uuid) -> the inputs FlashInfer-Bench sees where ours differ
        # (synthesized indices written as blobs); ours are written under `x_inputs`
        self.fib_inputs: dict[tuple[str, str], dict[str, InputSpec]] = {}
        self._conventions: tuple[str, dict[str, str]] = ("auto", {})

    # --- building ----------------------------------------------------------------------------

    def add_definition(self, d: Definition) -> None:
        if d.name in self.definitions:
            raise FlashInferImportError(f"duplicate definition name {d.name!r}")
        self.definitions[d.name] = d

    def add_workload(self, definition: str, w: Workload) -> None:
        ws = self.workloads.setdefault(definition, [])
        if any(x.uuid == w.uuid for x in ws):
            return
        ws.append(w)

    def add_solution(self, s: Solution) -> bool:
        """Add a solution; one in a language FlashInfer-Bench cannot hold (c, nki) goes to
        `x_solutions/`, which FlashInfer-Bench does not read (noted; returns False)."""
        fib = s.spec.language in FIB_LANGUAGES
        if not fib:
            self.notes.append(
                f"solution {s.name} ({s.definition}): language {s.spec.language!r} has no "
                "FlashInfer-Bench equivalent; written under x_solutions/"
            )
        if s.name in self.solutions:
            raise FlashInferImportError(f"duplicate solution name {s.name!r}")
        self.solutions[s.name] = s
        return fib

    def add_trace(self, t: Trace) -> None:
        if t.solution is not None and t.solution not in self.solutions:
            self.notes.append(f"trace of {t.solution} ({t.definition}) skipped: its solution is not exported")
            return
        self.traces.append(t)
        self._trace_origin.append(None)

    # --- reading -----------------------------------------------------------------------------

    @classmethod
    def load(
        cls,
        path: str | Path,
        *,
        convention: str = "auto",
        conventions: dict[str, str] | None = None,
        solution_files: Sequence[str] = (),
    ) -> TraceSet:
        """Read a trace-set folder as published: a file (or line) that cannot be read into our
        schema is skipped with the reason (`skipped`), and the rest is read. Workloads and
        traces are read from `.jsonl` lines and from `.json` files of one record each. Of
        solution files that share a name, one is kept (`folder.choose_duplicate`;
        `solution_files` names the ones to keep, relative to the folder). A Python/Triton
        solution file that leaves `destination_passing_style` implicit gets `convention`
        ("auto": what its entry function shows, else FlashInfer-Bench's default,
        destination-passing; "value" or "dps" for all of them); `conventions` (solution name ->
        "value" | "dps") decides per solution, over the file too."""
        root = Path(path)
        if not root.is_dir():
            raise FlashInferImportError(f"{root}: not a directory")
        for choice in (convention, *(conventions or {}).values()):
            if choice not in ("auto", "value", "dps"):
                raise FlashInferImportError(f"convention {choice!r}: choose auto, value or dps")
        missing = [f for f in solution_files if not (root / f).is_file()]
        if missing:
            raise FlashInferImportError(
                f"--solution-file {', '.join(missing)}: no such file in {root} (give paths relative to it)"
            )
        ts = cls(root)
        ts._conventions = (convention, dict(conventions or {}))
        ts._read_definitions()
        ts._read_solutions([str(Path(f)) for f in solution_files])
        unknown = sorted(ts._conventions[1])
        if unknown:
            raise FlashInferImportError(
                f"no solution named {', '.join(unknown)} (for --solution-convention); the "
                f"folder has: {', '.join(sorted(ts.solutions)) or 'none'}"
            )
        ts._read_lines("workloads")
        ts._read_lines("traces")
        return ts

    def _skip(self, where: str, reason: str) -> None:
        self.skipped.append(Skipped(where, reason))

    def _read_definitions(self) -> None:
        assert self.root is not None
        recs, bad = records(self.root, "definitions", lines=False, decode=_nonfinite_in)
        self.skipped += bad
        for r in recs:
            try:
                d = _convert(_fill_definition(r.raw), Definition, Path(r.path))
            except FlashInferImportError as e:
                self._skip(r.path, _reason(e, r.path))
                continue
            errs = definition_errors(d)
            if errs:
                self._skip(r.path, "invalid Definition: " + "; ".join(errs))
            elif d.name in self.definitions:
                first = self._origin[("definition", d.name)].path
                self._skip(r.path, f"a second definition named {d.name!r}; kept {first}")
            else:
                self.definitions[d.name] = d
                self._origin[("definition", d.name)] = Origin(r.path, r.raw)

    def _read_solutions(self, preferred: list[str]) -> None:
        assert self.root is not None
        recs: list[Record] = []
        for top in ("solutions", "x_solutions"):
            got, bad = records(self.root, top, lines=False, decode=_nonfinite_in)
            recs += got
            self.skipped += bad
        by_name: dict[str, list[tuple[Record, Solution]]] = {}
        for r in recs:
            try:
                s = _convert(r.raw, Solution, Path(r.path))
            except FlashInferImportError as e:
                self._skip(r.path, _reason(e, r.path))
                continue
            errs = solution_errors(s)
            if errs:
                self._skip(r.path, "invalid Solution: " + "; ".join(errs))
                continue
            by_name.setdefault(s.name, []).append((r, s))
        for name, copies in by_name.items():
            keep, others = choose_duplicate(name, [r for r, _ in copies], preferred)
            self.skipped += others
            s = next(s for r, s in copies if r is keep)
            self.solutions[name] = self._convention(s, keep.raw, Path(keep.path))
            self._origin[("solution", name)] = Origin(keep.path, keep.raw)

    def _read_lines(self, top: str) -> None:
        """Workload lines (`workloads/`, and those `flashinfer-bench report merge` puts under
        `traces/`) and evaluated traces (`traces/`)."""
        assert self.root is not None
        recs, bad = records(self.root, top, lines=True, decode=_nonfinite_in)
        self.skipped += bad
        for r in recs:
            try:
                t = _convert(_fill_line(r.raw), Trace, Path(r.path), r.line)
            except FlashInferImportError as e:
                self._skip(r.where, _reason(e, r.where))
                continue
            evaluated = t.solution is not None or t.evaluation is not None or t.x_untimed is not None
            if not evaluated:
                self._add_read_workload(t, r)
            elif top == "workloads":
                self._skip(
                    r.where, "a workload record with a solution or an evaluation (a trace belongs in traces/)"
                )
            else:
                self.traces.append(t)
                self._trace_origin.append(Origin(r.path, r.raw))

    def _add_read_workload(self, t: Trace, r: Record) -> None:
        d = self.definitions.get(t.definition)
        if d is None:
            self._skip(r.where, f"workload of {t.definition!r}, which no definition read here defines")
            return
        errs = workload_errors(t.workload, d)
        if errs:
            self._skip(r.where, "invalid Workload: " + "; ".join(errs))
            return
        if any(w.uuid == t.workload.uuid for w in self.workloads.get(t.definition, [])):
            self._skip(r.where, f"workload {t.workload.uuid} of {t.definition} read already")
            return
        self.workloads.setdefault(t.definition, []).append(t.workload)
        self._origin[("workload", f"{t.definition}\x1f{t.workload.uuid}")] = Origin(r.path, r.raw)
        if "x_inputs" in r.raw["workload"]:
            fib = msgspec.convert(
                _tagged(r.raw["workload"].get("inputs", {}), _input_tag), dict[str, InputSpec]
            )
            self.fib_inputs[(t.definition, t.workload.uuid)] = fib

    def _convention(self, s: Solution, raw: Any, f: Path) -> Solution:
        """The calling convention of a solution as read (see `load`), noted when it was chosen
        rather than written in the file."""
        default, chosen = self._conventions
        spec = raw.get("spec") if isinstance(raw, dict) else None
        explicit = isinstance(spec, dict) and "destination_passing_style" in spec
        if s.name in chosen:
            dps = chosen.pop(s.name) == "dps"
            self.notes.append(f"{s.name}: destination_passing_style={str(dps).lower()} (chosen at import)")
            return self._with_convention(s, dps)
        d = self.definitions.get(s.definition)
        if explicit or d is None or s.spec.language not in ("python", "triton"):
            return s
        if default != "auto":
            dps = default == "dps"
            self.notes.append(
                f"{s.name}: {'destination-passing' if dps else 'value-returning'} (--convention "
                f"{default}; the file leaves destination_passing_style implicit)"
            )
            return self._with_convention(s, dps)
        inferred = infer_destination_passing(s, d)
        if inferred is None:
            self.notes.append(
                f"{s.name}: no destination_passing_style and its entry tells neither convention; "
                "FlashInfer-Bench's default (destination-passing) is kept (choose with "
                f"--solution-convention {s.name}=value|dps)"
            )
            return s
        by = (
            "signature"
            if entry_params(s.entry_file().content, s.entry_symbol) is not None
            else "return statements"
        )
        kind = "destination-passing" if inferred else "value-returning"
        self.notes.append(
            f"{s.name}: {kind} by its entry's {by} (the file leaves destination_passing_style "
            f"implicit; override with --solution-convention {s.name}=value|dps)"
        )
        return self._with_convention(s, inferred)

    @staticmethod
    def _with_convention(s: Solution, dps: bool) -> Solution:
        return msgspec.structs.replace(s, spec=msgspec.structs.replace(s.spec, destination_passing_style=dps))

    def blob_files(self) -> list[str]:
        """Relative paths of the safetensors files the workloads name."""
        out = []
        for name, ws in self.workloads.items():
            for w in ws:
                inputs = [*w.inputs.values(), *self.fib_inputs.get((name, w.uuid), {}).values()]
                out += [i.path for i in inputs if isinstance(i, SafetensorsInput)]
        return sorted(set(out))

    # --- writing -----------------------------------------------------------------------------

    def _path(self, key: tuple[str, str], default: str) -> tuple[str, Any]:
        o = self._origin.get(key)
        return (o.path, o.raw) if o is not None else (default, None)

    def save(self, out: str | Path, *, copy_blobs: bool = True) -> Path:
        """Write the trace set as a FlashInfer-Bench folder; returns its path."""
        dest = Path(out)
        dest.mkdir(parents=True, exist_ok=True)
        for d in self.definitions.values():
            rel, raw = self._path(("definition", d.name), f"definitions/{d.op_type}/{d.name}.json")
            data = merge_raw(to_fib(d), raw) if raw is not None else to_fib(d)
            if raw is not None:
                _untag_like(data.get("axes"), raw.get("axes"))
            _write_json(dest / rel, data)
        for s in self.solutions.values():
            op = self.definitions[s.definition].op_type if s.definition in self.definitions else "unknown"
            top = "solutions" if s.spec.language in FIB_LANGUAGES else "x_solutions"
            rel, raw = self._path(("solution", s.name), f"{top}/{s.author}/{op}/{s.definition}/{s.name}.json")
            data = merge_raw(to_fib(s), raw) if raw is not None else to_fib(s)
            if (
                raw is not None
                and "destination_passing_style" not in raw.get("spec", {})
                and s.spec.destination_passing_style
            ):  # FlashInfer-Bench's default, left implicit as it was
                data["spec"].pop("destination_passing_style", None)
            _write_json(dest / rel, data)
        lines: dict[str, list[Any]] = {}
        for name, ws in self.workloads.items():
            op = self.definitions[name].op_type if name in self.definitions else "unknown"
            for w in ws:
                rel, raw = self._path(("workload", f"{name}\x1f{w.uuid}"), f"workloads/{op}/{name}.jsonl")
                line = _workload_line(name, w)
                fib = self.fib_inputs.get((name, w.uuid))
                if fib is not None and raw is None:
                    line["workload"]["x_inputs"] = line["workload"]["inputs"]
                    line["workload"]["inputs"] = msgspec.to_builtins(fib)
                lines.setdefault(rel, []).append(
                    _restore_line(merge_raw(line, raw), raw) if raw is not None else line
                )
        for t, origin in zip(self.traces, self._trace_origin, strict=True):
            if origin is not None:
                rel, raw = origin.path, origin.raw
            else:
                sol = self.solutions.get(t.solution or "")
                author = sol.author if sol else "unknown"
                op = self.definitions[t.definition].op_type if t.definition in self.definitions else "unknown"
                rel, raw = f"traces/{author}/{op}/{t.definition}.jsonl", None
            line = to_fib(t)
            lines.setdefault(rel, []).append(
                _restore_line(merge_raw(line, raw), raw) if raw is not None else line
            )
        for rel, objs in lines.items():
            p = dest / rel
            p.parent.mkdir(parents=True, exist_ok=True)
            if rel.endswith(".json") and len(objs) == 1:  # published one record to a file
                _write_json(p, objs[0])
            else:
                p.write_text("".join(json.dumps(o, allow_nan=False) + "\n" for o in objs))
        if copy_blobs and self.root is not None:
            for rel in self.blob_files():
                if Path(rel).is_absolute():
                    continue
                src = self.root / rel
                if src.is_file():
                    (dest / rel).parent.mkdir(parents=True, exist_ok=True)
                    if src.resolve() != (dest / rel).resolve():
                        shutil.copyfile(src, dest / rel)
                else:
                    self.notes.append(f"blob {rel} not copied: not present in {self.root}")
        return dest


def _convert(raw: Any, kind: type, f: Path, line: int | None = None) -> Any:
    try:
        return msgspec.convert(raw, kind)
    except msgspec.ValidationError as e:
        where = f"{f}:{line}" if line is not None else str(f)
        raise FlashInferImportError(f"{where}: invalid {kind.__name__}: {e}") from e


def _reason(e: FlashInferImportError, where: str) -> str:
    """The message of an error about `where`, without the location it starts with."""
    return str(e).removeprefix(f"{where}: ")


def _write_json(p: Path, obj: Any) -> None:
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(json.dumps(obj, indent=2, allow_nan=False) + "\n")
