"""Problem references in `problems` / `--problems`: `PROBLEM`, `SUITE/PROBLEM`,
`SUITE/PROBLEM@DEVICE`, and the errors for unknown suites, problems, device kinds and a
problem named twice."""

from __future__ import annotations

import pytest

from accelopt.config import ConfigError, ProblemRef, build_config, parse_problem_ref, target_devices
from suites.selection import load_problems


def test_the_three_forms_resolve_against_the_runs_suite_and_device():
    def parse(ref: str) -> ProblemRef:
        return parse_problem_ref(ref, suite="cpu", device="trn1")

    assert parse("silu") == ProblemRef("cpu", "silu", "trn1")
    assert parse("triton/rmsnorm_h4096") == ProblemRef("triton", "rmsnorm_h4096", "trn1")
    assert parse(" triton/rmsnorm_h4096@h100 ") == ProblemRef("triton", "rmsnorm_h4096", "h100")
    # a suite may be a path, an "@" in it is not a device
    assert parse("/data/x@y/suite/p") == ProblemRef("/data/x@y/suite", "p", "trn1")
    assert parse("/data/suite/p@cpu") == ProblemRef("/data/suite", "p", "cpu")


def test_mixed_references_load_with_their_devices():
    # as `--problems a,b,c` passes them (a YAML flow list)
    cfg = build_config(overrides=["problems=[cpu/silu@cpu,triton/rmsnorm_h4096@h100,matmul]", "device=cpu"])
    problems = load_problems(cfg)
    assert [p.name for p in problems] == ["silu", "rmsnorm_h4096", "matmul"]
    assert [p.baseline.spec.language for p in problems] == ["c", "triton", "c"]
    assert target_devices(cfg, [p.name for p in problems]) == {
        "silu": "cpu",
        "rmsnorm_h4096": "h100",
        "matmul": "cpu",
    }
    # bare names: the run's suite and device, as before
    cfg = build_config(overrides=["suite=triton", "device=h200", "problems=[rmsnorm_h4096]"])
    assert [p.name for p in load_problems(cfg)] == ["rmsnorm_h4096"]
    assert target_devices(cfg, ["rmsnorm_h4096", "other"]) == {"rmsnorm_h4096": "h200", "other": "h200"}


@pytest.mark.parametrize(
    ("problems", "message"),
    [
        ("cpu/silu@cpu,triton/silu@h100", "'silu' is referenced twice"),
        ("cpu/silu@cpu,cpu/silu@trn1", "a run optimizes each problem name once"),
        ("silu,cpu/silu", "'silu' is referenced twice"),
        ("cpu/silu@", "no device kind after '@'"),
        ("/silu", "expected PROBLEM, SUITE/PROBLEM or SUITE/PROBLEM@DEVICE"),
    ],
)
def test_bad_references_are_config_errors(problems, message):
    with pytest.raises(ConfigError, match=message):
        build_config(overrides=[f"problems=[{problems}]"])


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (["problems=[cpu/silu@h999]"], "problem 'cpu/silu@h999': unknown device kind 'h999'"),
        (["problems=[nosuite/silu@cpu]"], "problem 'nosuite/silu@cpu': no suite named 'nosuite'"),
        (["problems=[triton/nope@h100]"], "problem 'triton/nope@h100': suite 'triton' has no problem 'nope'"),
        (["problems=[cpu/silu,nope]"], "problems not in suite 'cpu': nope"),
        (["device=h999"], "device: unknown device kind 'h999'"),
    ],
)
def test_unknown_suite_problem_or_device_is_named(overrides, message):
    cfg = build_config(overrides=overrides)
    with pytest.raises(ConfigError, match=message):
        load_problems(cfg)
