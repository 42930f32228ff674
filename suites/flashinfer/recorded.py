"""A FlashInfer-Bench folder's recorded traces, kept with the suite imported from it, so that
exporting the suite gives them back (`accelopt suite export-flashinfer`).

An imported problem folder may hold, besides what `suites.load_problem_dir` reads:

    traces.jsonl            the folder's traces of this definition, as FlashInfer-Bench lines
    solutions/<name>.json   the folder's solutions of this definition other than the baseline
                            (the traces name them)

The problem itself (and its hash) does not change: these are records, read only by the export.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from pathlib import Path

import msgspec

from accelopt.problem import Problem, ProblemFileError, Solution, Trace, load_solution, to_json
from suites.flashinfer.traceset import _nonfinite_in, to_fib

TRACES_FILE = "traces.jsonl"
SOLUTIONS_DIR = "solutions"


class Recorded(msgspec.Struct, kw_only=True):
    """A definition's recorded traces and the solutions besides the baseline."""

    solutions: list[Solution] = []
    traces: list[Trace] = []


def recorded_of(solutions: Iterable[Solution], traces: Iterable[Trace], p: Problem) -> Recorded:
    """What a folder records of the problem's definition (its solutions other than the
    baseline, and its traces)."""
    name = p.definition.name
    return Recorded(
        solutions=[s for s in solutions if s.definition == name and s.name != p.baseline.name],
        traces=[t for t in traces if t.definition == name],
    )


def write_recorded(folder: Path, rec: Recorded) -> None:
    if rec.traces:  # FlashInfer-Bench lines: non-finite errors as "NaN" / "Infinity" strings
        text = "".join(json.dumps(to_fib(t), allow_nan=False) + "\n" for t in rec.traces)
        (folder / TRACES_FILE).write_text(text)
    for s in rec.solutions:
        (folder / SOLUTIONS_DIR).mkdir(exist_ok=True)
        (folder / SOLUTIONS_DIR / f"{s.name}.json").write_bytes(to_json(s) + b"\n")


def read_recorded(folder: Path) -> Recorded:
    traces = []
    file = folder / TRACES_FILE
    if file.is_file():
        for i, line in enumerate(file.read_bytes().splitlines(), 1):
            if not line.strip():
                continue
            try:
                traces.append(msgspec.convert(_nonfinite_in(json.loads(line)), Trace))
            except (ValueError, msgspec.ValidationError) as e:
                raise ProblemFileError(f"{file}:{i}: invalid Trace: {e}") from e
    solutions = [load_solution(p) for p in sorted((folder / SOLUTIONS_DIR).glob("*.json"))]
    return Recorded(solutions=solutions, traces=traces)


def suite_records(
    suite: str, problems: Sequence[Problem]
) -> tuple[list[Solution], list[tuple[Solution, Trace]]]:
    """The recorded solutions and (solution, trace) pairs of a suite's problems, for the export;
    a trace whose solution the suite does not hold is left out by the export (noted)."""
    import suites

    root = suites.suite_dir(suite)
    extra: list[Solution] = []
    pairs: list[tuple[Solution, Trace]] = []
    for p in problems:
        rec = read_recorded(root / p.name)
        extra += rec.solutions
        by_name = {s.name: s for s in (p.baseline, *rec.solutions)}
        for t in rec.traces:
            sol = by_name.get(t.solution or "")
            if sol is not None:
                pairs.append((sol, t))
    return extra, pairs


__all__ = [
    "SOLUTIONS_DIR",
    "TRACES_FILE",
    "Recorded",
    "read_recorded",
    "recorded_of",
    "suite_records",
    "write_recorded",
]
