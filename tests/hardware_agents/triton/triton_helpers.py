"""Helpers for the Triton tests: solutions made by editing a suite baseline."""

from __future__ import annotations

import msgspec

from accelopt.problem import Problem, Solution, SourceFile


def baseline_source(problem: Problem) -> str:
    return problem.baseline.sources[0].content


def edited(problem: Problem, old: str, new: str, count: int = 1) -> str:
    """The baseline's source with `old` replaced by `new` (which must occur)."""
    src = baseline_source(problem)
    assert old in src, f"{old!r} not in the {problem.name} baseline"
    return src.replace(old, new, count)


def solution(
    problem: Problem,
    source: str,
    *,
    name: str = "candidate",
    dps: bool | None = None,
    language: str | None = None,
) -> Solution:
    spec = problem.baseline.spec
    if dps is not None:
        spec = msgspec.structs.replace(spec, destination_passing_style=dps)
    if language is not None:
        spec = msgspec.structs.replace(spec, language=language)
    return msgspec.structs.replace(
        problem.baseline,
        name=name,
        author="test",
        spec=spec,
        sources=[SourceFile(path=problem.baseline.sources[0].path, content=source)],
    )


def failing(profile) -> list[str]:  # type: ignore[no-untyped-def]
    return [c.case for c in profile.correctness if not c.passed]
