"""Problem suites as package data (they ship in the wheel).

Layout: `suites/<suite>/suite.json` marks a suite (name, description, device kind, language,
baseline entry point); each subfolder with a `definition.json` is a problem:
`definition.json` (FlashInfer Definition + x_ fields), `workload.json` (its axis values) and
the baseline kernel (`baseline.c` for the CPU suite). Optional per problem:
`check_workloads.jsonl` (more workloads, one per line, as Workload objects or FlashInfer
workload lines, at which correctness is also checked: `Problem.check_workloads`) and
`solution.json` (a full Solution used as the baseline instead of the suite's entry point,
for multi-file or value-returning baselines). Relative safetensors paths in workloads are
resolved against the problem folder.

    list_suites() -> ["cpu", ...]
    load_suite("cpu") -> [Problem, ...]
    get_problem("cpu/matmul") -> Problem

Besides the package's suites, a suite name resolves in the user suite directories
(`$ACCELOPT_SUITES_PATH`, os.pathsep-separated, else `user_suites_dir()`, where importers
such as `accelopt suite import-nkibench` write), and a path to a folder holding a
`suite.json` is a suite too (`load_suite("/data/nkibench")`).
"""

from __future__ import annotations

import os
from pathlib import Path

import msgspec

from accelopt.problem import (
    Definition,
    Problem,
    ProblemFileError,
    SafetensorsInput,
    Workload,
    load_definition,
    load_solution,
    load_workload,
    one_file_solution,
    workload_errors,
)

ROOT = Path(__file__).resolve().parent


class SuiteInfo(msgspec.Struct, kw_only=True, frozen=True):
    name: str
    description: str
    device: str
    language: str
    entry_point: str  # "<baseline file>::<symbol>"


def user_suites_dir() -> Path:
    """Where imported suites go by default: $XDG_DATA_HOME/accelopt/suites (~/.local/share/...)."""
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base) / "accelopt" / "suites"


def _user_dirs() -> list[Path]:
    env = os.environ.get("ACCELOPT_SUITES_PATH")
    return [Path(p).expanduser() for p in env.split(os.pathsep) if p] if env else [user_suites_dir()]


def _is_path(name: str) -> bool:
    return os.sep in name or "/" in name or name.startswith((".", "~"))


def suite_dir(name: str) -> Path:
    """The folder of suite `name` (KeyError, naming the suites there are, if there is none)."""
    return _suite_dir(name)


def _suite_dir(name: str) -> Path:
    if _is_path(name):
        d = Path(name).expanduser()
        if (d / "suite.json").is_file():
            return d
        raise KeyError(f"{name!r} is not a suite folder (no suite.json); suites: {', '.join(list_suites())}")
    if name.startswith("_"):
        raise KeyError(f"no suite named {name!r}; suites: {', '.join(list_suites())}")
    for base in (ROOT, *_user_dirs()):
        if (base / name / "suite.json").is_file():
            return base / name
    for path, declared in _declared_names():  # a folder whose suite.json names it differently (--name)
        if declared == name:
            return path
    raise KeyError(f"no suite named {name!r}; suites: {', '.join(list_suites())}")


def _declared_names() -> list[tuple[Path, str]]:
    """(folder, the name its suite.json declares, else the folder's name) of the user suite folders."""
    out = []
    for base in _user_dirs():
        for p in sorted(base.glob("*/suite.json")):
            if p.parent.name.startswith((".", "_")):
                continue
            try:
                name = str(msgspec.json.decode(p.read_bytes())["name"]) or p.parent.name
            except (msgspec.DecodeError, KeyError, TypeError, OSError):
                name = p.parent.name
            out.append((p.parent, name))
    return out


def list_suites() -> list[str]:
    """Built-in suites and the user suites, by the name their suite.json declares."""
    names = {p.parent.name for p in ROOT.glob("*/suite.json")}
    names.update(n for _, n in _declared_names() if not n.startswith((".", "_")))
    return sorted(names)


def suite_info(name: str) -> SuiteInfo:
    path = _suite_dir(name) / "suite.json"
    try:
        return msgspec.json.decode(path.read_bytes(), type=SuiteInfo)
    except (msgspec.ValidationError, msgspec.DecodeError) as e:
        raise ProblemFileError(f"{path}: invalid suite.json: {e}") from e


def problem_names(suite: str) -> list[str]:
    return sorted(p.parent.name for p in _suite_dir(suite).glob("*/definition.json"))


def _resolve_blobs(workload: Workload, folder: Path) -> Workload:
    inputs = {
        n: msgspec.structs.replace(i, path=str(folder / i.path))
        if isinstance(i, SafetensorsInput) and not Path(i.path).is_absolute()
        else i
        for n, i in workload.inputs.items()
    }
    return msgspec.structs.replace(workload, inputs=inputs) if inputs != workload.inputs else workload


def _check_workloads(path: Path, definition: Definition) -> list[Workload]:
    file = path / "check_workloads.jsonl"
    if not file.is_file():
        return []
    out = []
    for i, line in enumerate(file.read_bytes().splitlines(), 1):
        if not line.strip():
            continue
        try:
            raw = msgspec.json.decode(line)
            w = msgspec.convert(
                raw["workload"] if isinstance(raw, dict) and "workload" in raw else raw, Workload
            )
        except (msgspec.DecodeError, msgspec.ValidationError) as e:
            raise ProblemFileError(f"{file}:{i}: invalid workload: {e}") from e
        errs = workload_errors(w, definition)
        if errs:
            raise ProblemFileError(f"{file}:{i}: invalid Workload: " + "; ".join(errs))
        out.append(_resolve_blobs(w, path))
    return out


def load_problem_dir(path: Path, info: SuiteInfo) -> Problem:
    """A problem folder: definition.json, workload.json and the baseline source."""
    definition = load_definition(path / "definition.json")
    workload = _resolve_blobs(load_workload(path / "workload.json", definition), path)
    checks = _check_workloads(path, definition)
    if (path / "solution.json").is_file():
        baseline = load_solution(path / "solution.json")
        return Problem(definition=definition, workload=workload, baseline=baseline, check_workloads=checks)
    file, _, _symbol = info.entry_point.partition("::")
    src = path / file
    try:
        content = src.read_text()
    except OSError as e:
        raise ProblemFileError(f"{src}: cannot read baseline ({e.strerror})") from e
    baseline = one_file_solution(
        definition.name,
        content,
        entry_point=info.entry_point,
        language=info.language,
        device=info.device,
        description=f"baseline of the {info.name} suite",
    )
    return Problem(definition=definition, workload=workload, baseline=baseline, check_workloads=checks)


def load_suite(name: str) -> list[Problem]:
    info = suite_info(name)
    return [load_problem_dir(_suite_dir(name) / p, info) for p in problem_names(name)]


def get_problem(ref: str) -> Problem:
    """`"<suite>/<problem>"`, e.g. `"cpu/matmul"` (the suite may be a path)."""
    suite, sep, problem = ref.rpartition("/")
    if not sep or not problem:
        raise KeyError(f"problem reference must be SUITE/PROBLEM, got {ref!r}")
    if problem not in problem_names(suite):
        raise KeyError(
            f"suite {suite!r} has no problem {problem!r}; problems: {', '.join(problem_names(suite))}"
        )
    return load_problem_dir(_suite_dir(suite) / problem, suite_info(suite))


__all__ = [
    "SuiteInfo",
    "get_problem",
    "list_suites",
    "load_problem_dir",
    "load_suite",
    "problem_names",
    "suite_dir",
    "suite_info",
    "user_suites_dir",
]
