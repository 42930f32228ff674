"""The simulated device: deterministic draws, the configured pass rate, no CPU while a
profile "runs", and hidden/refused unless opted in (hardware_agents/sim/)."""

from __future__ import annotations

import resource
from pathlib import Path

import msgspec
import pytest

import suites
from accelopt.config import ConfigError, build_config
from accelopt.problem import SourceFile
from hardware_agents.families import available_devices, get_agent, registered_kinds
from hardware_agents.sim.agent import SimNotAllowed
from hardware_agents.sim.gate import ALLOW_ENV
from hardware_agents.sim.suite import write_suite


@pytest.fixture
def problems(tmp_path: Path):
    return suites.load_suite(str(write_suite(tmp_path, 2)))


def variant(problem, text: str):
    """The baseline with a marker comment: a distinct kernel source."""
    src = problem.baseline.sources[0]
    return msgspec.structs.replace(
        problem.baseline, sources=[SourceFile(path=src.path, content=src.content + f"\n/* {text} */\n")]
    )


def agent(**opts):
    return get_agent("sim", allow=True, profile_s=0.0, **opts)


def test_draws_are_deterministic_per_kernel_and_seed(problems):
    p = problems[0]
    a, b, other_seed = agent(seed=1), agent(seed=1), agent(seed=2)
    kernels = [variant(p, f"v{i}") for i in range(20)]
    first = [a.profile(p, k) for k in kernels]
    again = [b.profile(p, k) for k in kernels]
    assert [(x.status, x.latency_ms) for x in first] == [(x.status, x.latency_ms) for x in again]
    seeded = [other_seed.profile(p, k) for k in kernels]
    assert [x.latency_ms for x in first] != [x.latency_ms for x in seeded]
    assert len({x.latency_ms for x in first if x.latency_ms}) > 10  # kernels differ from one another


def test_pass_rate_and_plausible_profiles(problems):
    p = problems[1]
    a = agent(pass_rate=0.7, latency_ms=2.0, spread=0.3)
    profiles = [a.profile(p, variant(p, f"k{i}")) for i in range(400)]
    passed = [x for x in profiles if x.status == "passed"]
    assert {x.status for x in profiles} == {"passed", "incorrect"}
    assert 0.63 <= len(passed) / len(profiles) <= 0.77
    for x in passed:
        assert x.device == "sim" and x.latency is not None and len(x.latency.samples_ms) == 5
        assert x.latency.min_ms <= x.latency.median_ms <= x.latency.max_ms
        assert 0 < x.peak_fraction < 1 and x.bound == "memory" and x.t_peak_ms > 0
        assert [c.case for c in x.correctness] == ["seed0", "seed21", "seed42", "large"]
    medians = sorted(x.latency_ms for x in passed)
    assert 1.5 < medians[len(medians) // 2] < 2.6  # the configured median (log-normal, sigma 0.3)
    for x in profiles:
        if x.status == "incorrect":
            assert sum(not c.passed for c in x.correctness) == 1 and "simulated wrong values" in x.log
    # the problem's own baseline passes whatever the rate, so a run can always start
    assert agent(pass_rate=0.0).profile(p, p.baseline).status == "passed"
    assert agent(pass_rate=0.0).profile(p, variant(p, "x")).status == "incorrect"
    assert agent(pass_rate=0.0, baseline_passes=False).profile(p, p.baseline).status == "incorrect"


def test_a_profile_sleeps_without_cpu_and_honours_the_timeout(problems):
    p = problems[0]
    a = get_agent("sim", allow=True, profile_s=0.4)
    before = resource.getrusage(resource.RUSAGE_SELF)
    prof = a.profile(p, variant(p, "slow"))
    after = resource.getrusage(resource.RUSAGE_SELF)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    assert prof.wall_s >= 0.4
    assert cpu < 0.1 * prof.wall_s, f"a simulated profile used {cpu:.3f} s of CPU in {prof.wall_s:.3f} s"
    late = a.profile(p, variant(p, "slow2"), timeout_s=0.05)
    assert late.status == "timeout" and "over the 0.05 s limit" in late.log


def test_bad_options_are_refused_clearly():
    with pytest.raises(ValueError, match="pass_rate"):
        get_agent("sim", allow=True, pass_rate=1.5)
    with pytest.raises(ValueError, match="latency_ms"):
        get_agent("sim", allow=True, latency_ms=0)


def test_hidden_and_refused_without_the_opt_in(monkeypatch, tmp_path):
    monkeypatch.delenv(ALLOW_ENV, raising=False)
    assert "sim" in registered_kinds()
    assert "sim" not in available_devices()
    with pytest.raises(SimNotAllowed, match=ALLOW_ENV):
        get_agent("sim")
    write_suite(tmp_path / "suites", 1)
    monkeypatch.setenv("ACCELOPT_SUITES_PATH", str(tmp_path / "elsewhere"))
    assert "sim" not in suites.list_suites()  # never shipped: a test writes it where it wants
    monkeypatch.setenv(ALLOW_ENV, "1")
    assert "sim" in available_devices()
    assert get_agent("sim").kind == "sim"


def test_accelopt_run_refuses_sim_without_the_opt_in(monkeypatch, tmp_path, capsys):
    from cli.main import main
    from suites.selection import load_problems

    monkeypatch.delenv(ALLOW_ENV, raising=False)
    suite = write_suite(tmp_path, 1)
    rc = main(
        [
            "run",
            "--suite",
            str(suite),
            "--device",
            "sim",
            "--root",
            str(tmp_path / "runs"),
            "--memory",
            str(tmp_path / "mem"),
            "--no-preflight",
        ]
    )
    assert rc == 2
    out = " ".join(capsys.readouterr().err.split())
    assert "simulated device" in out and ALLOW_ENV in out
    # a problem reference naming the device is refused the same way
    cfg = build_config(overrides=[f"problems=[{suite}/p000@sim]"])
    with pytest.raises(ConfigError, match=ALLOW_ENV):
        load_problems(cfg)
    # the config flag opts in (it travels to every profiler host with the run's config)
    cfg = build_config(overrides=[f"suite={suite}", "device=sim", "devices.sim.options.allow=true"])
    assert [p.name for p in load_problems(cfg)] == ["p000"]
    monkeypatch.setenv(ALLOW_ENV, "1")
    cfg = build_config(overrides=[f"suite={suite}", "device=sim"])
    assert [p.name for p in load_problems(cfg)] == ["p000"]


def test_run_session_refuses_sim_without_the_opt_in(monkeypatch, tmp_path):
    from actors.runtime.session import RunError, run_session

    monkeypatch.delenv(ALLOW_ENV, raising=False)
    suite = write_suite(tmp_path, 1)
    cfg = build_config(overrides=[f"suite={suite}", "device=sim", f"root={tmp_path / 'runs'}"])
    with pytest.raises(RunError, match=ALLOW_ENV):
        run_session(cfg, suites.load_suite(str(suite)))


def test_device_concurrency_config():
    from actors.runtime.deployment import profiler_options

    cfg = build_config(overrides=["devices.sim.concurrency=64", "devices.sim.workers=1"])
    assert profiler_options("sim", cfg).concurrency == 64
    assert profiler_options("cpu", cfg).concurrency == 1
    with pytest.raises(ConfigError, match="concurrency"):
        build_config(overrides=["devices.sim.concurrency=0"])
