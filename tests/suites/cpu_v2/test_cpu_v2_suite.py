"""The cpu_v2 suite: same problems as `cpu`, baselines with a declared tuning space, and every
point of that space correct (a random sample per problem, compiled and checked by the real
CPU agent)."""

from __future__ import annotations

import hashlib
import os
import re

import msgspec
import pytest

import suites
from accelopt.problem import Problem, Solution
from hardware_agents.base import HardwareAgent
from hardware_agents.languages.tunables import find_tunables
from suites.tuning import Knob, SpaceError, default_point, parse_space, sample_points, set_values, space_size

PROBLEMS = suites.problem_names("cpu")
# random points checked per problem besides the baseline; raise it for a longer sweep
POINTS = int(os.environ.get("ACCELOPT_CPU_V2_POINTS", "2"))


def _with_source(problem: Problem, content: str) -> Solution:
    src = problem.baseline.sources[0]
    return msgspec.structs.replace(problem.baseline, sources=[msgspec.structs.replace(src, content=content)])


def test_suite_is_registered_with_the_same_problems() -> None:
    assert "cpu_v2" in suites.list_suites()
    assert suites.problem_names("cpu_v2") == PROBLEMS and len(PROBLEMS) == 14
    info = suites.suite_info("cpu_v2")
    assert (info.device, info.language, info.entry_point) == ("cpu", "c", "baseline.c::kernel")


@pytest.mark.parametrize("name", PROBLEMS)
def test_definitions_and_shapes_are_the_cpu_suites(name: str) -> None:
    old, new = suites.get_problem(f"cpu/{name}"), suites.get_problem(f"cpu_v2/{name}")
    assert new.definition == old.definition
    assert new.workload == old.workload
    assert new.baseline.sources[0].content != old.baseline.sources[0].content


@pytest.mark.parametrize("name", PROBLEMS)
def test_every_tuner_constant_is_declared(name: str) -> None:
    """The `// tune:` declarations and the builtin tuner's `#define NAME <int>` pattern agree,
    the space is real (several knobs, many points) and the shipped values are legal."""
    p = suites.get_problem(f"cpu_v2/{name}")
    src = p.baseline.sources[0].content
    knobs = parse_space(src)
    assert {k.name for k in knobs} == {t.name for t in find_tunables(src, skip=p.axis_values())}
    assert len(knobs) >= 5 and space_size(knobs) >= 300
    assert all(k.doc for k in knobs)
    assert set_values(src, default_point(knobs)) == src


@pytest.mark.parametrize("name", PROBLEMS)
def test_sampled_points_are_correct(name: str, cpu_v2_agent: HardwareAgent) -> None:
    p = suites.get_problem(f"cpu_v2/{name}")
    src = p.baseline.sources[0].content
    knobs = parse_space(src)
    seed = int(hashlib.sha256(name.encode()).hexdigest()[:8], 16) + int(
        os.environ.get("ACCELOPT_CPU_V2_SEED", "0")
    )
    points = [default_point(knobs), *sample_points(knobs, POINTS, seed=seed)]
    for point in points:
        prof = cpu_v2_agent.profile(p, _with_source(p, set_values(src, point)), measure=False)
        assert prof.status == "unmeasured", f"{name} at {point}: {prof.status}\n{prof.log}"
        assert prof.correctness and all(c.passed for c in prof.correctness)


def test_an_illegal_value_stops_the_build(cpu_v2_agent: HardwareAgent) -> None:
    p = suites.get_problem("cpu_v2/silu")
    src, n = re.subn(
        r"^#define VEC \d+$", "#define VEC 3", p.baseline.sources[0].content, count=1, flags=re.M
    )
    assert n == 1
    prof = cpu_v2_agent.profile(p, _with_source(p, src), measure=False)
    assert prof.status == "compile_error"
    assert "VEC: not a legal value" in prof.log


def test_parse_and_set_values() -> None:
    src = (
        "// tune: TILE in {64,16,32} -- columns per tile\n#define TILE 32\n"
        "#define EPS 1e-5f\n"
        "// tune: FUSE in {1,2} -- 1 = two passes, 2 = fused\n#define FUSE 1  /* shipped */\n"
    )
    knobs = parse_space(src)
    assert knobs == [
        Knob("TILE", (16, 32, 64), 32, "columns per tile"),
        Knob("FUSE", (1, 2), 1, "1 = two passes, 2 = fused"),
    ]
    out = set_values(src, {"TILE": 64, "FUSE": 2})
    assert (
        "#define TILE 64\n" in out and "#define FUSE 2  /* shipped */\n" in out and "#define EPS 1e-5f" in out
    )
    with pytest.raises(SpaceError, match="TILE=48 is not legal"):
        set_values(src, {"TILE": 48})
    with pytest.raises(SpaceError, match="EPS is not a declared tunable"):
        set_values(src, {"EPS": 1})


@pytest.mark.parametrize(
    ("src", "message"),
    [
        ("// tune: A in {1,2}\n#define B 1\n", "followed by `#define B`"),
        ("// tune: A in {1,2}\n#define A 4\n", "not among its legal values"),
        ("// tune: A in {0,1}\n#define A 1\n", "all >= 1"),
        ("// tune: A in {1,x}\n#define A 1\n", "must be integers"),
        ("// tune: A in {1}\n#define A 1\n// tune: A in {1}\n#define A 1\n", "declared twice"),
    ],
)
def test_malformed_declarations_are_rejected(src: str, message: str) -> None:
    with pytest.raises(SpaceError, match=message):
        parse_space(src)


def test_sampling_is_deterministic_and_distinct() -> None:
    knobs = [Knob("A", (1, 2, 4), 1), Knob("B", (1, 2), 1), Knob("C", tuple(range(1, 101)), 1)]
    a, b = sample_points(knobs, 50, seed=7), sample_points(knobs, 50, seed=7)
    assert a == b and len({tuple(p.values()) for p in a}) == 50
    assert all(p["A"] in (1, 2, 4) and p["B"] in (1, 2) for p in a)
    small = sample_points(knobs[:2], 100, seed=1)  # smaller than n: the whole space
    assert sorted(tuple(p.values()) for p in small) == [(a, b) for a in (1, 2, 4) for b in (1, 2)]
