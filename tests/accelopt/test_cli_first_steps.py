"""What a new user meets first on the command line: a configuration that cannot work is refused
before anything starts (exit 2, one line saying why and what would work), errors are messages
and not tracebacks, every option says what it does, and log lines are for people."""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import suites
from accelopt.config import ConfigError, build_config
from cli.main import build_parser, main
from suites.selection import load_problems


def _cli(capsys, *argv: str) -> tuple[int, str]:
    capsys.readouterr()
    rc = main(list(argv))
    out = capsys.readouterr()
    return rc, out.out + out.err


@pytest.mark.parametrize(
    ("argv", "language", "device", "able"),
    [
        (["--problems", "cpu_v2/silu@h100"], "c", "h100", "cpu"),
        (["--problems", "silu", "--device", "trn1"], "c", "trn1", "cpu"),
        (["--suite", "cpu", "--device", "h100"], "c", "h100", "cpu"),
        (["--problems", "triton/rmsnorm_h4096@cpu"], "triton", "cpu", "b200, h100, h200"),
    ],
)
def test_a_problem_its_device_cannot_run_is_refused(capsys, tmp_path, argv, language, device, able):
    with pytest.raises(ConfigError, match=f"is written in {language}, which device '{device}' cannot run"):
        load_problems(build_config(overrides=_overrides(argv)))
    # (the timeout only bounds a run that a regression would start)
    rc, out = _cli(capsys, "run", *argv, "--root", str(tmp_path / "runs"), "--timeout", "5")
    lines = [ln for ln in out.splitlines() if ln.strip()]
    assert rc == 2 and len(lines) == 1, out
    assert f"is written in {language}, which device '{device}' cannot run" in out
    assert out.rstrip().endswith(f"devices that run {language}: {able}")
    assert not (tmp_path / "runs").exists()  # nothing started, nothing written


def _overrides(argv: list[str]) -> list[str]:
    """`run` flags as config overrides (as cli/options.py builds them)."""
    flags = dict(zip(argv[::2], argv[1::2], strict=True))
    out = [f"suite={flags['--suite']}"] if "--suite" in flags else []
    out += [f"problems=[{flags['--problems']}]"] if "--problems" in flags else []
    return out + ([f"device={flags['--device']}"] if "--device" in flags else [])


def test_an_unknown_suite_or_problem_names_what_there_is(capsys):
    rc, out = _cli(capsys, "run", "--suite", "nosuch")
    assert rc == 2 and f"no suite named 'nosuch'; suites: {', '.join(suites.list_suites())}" in out
    assert "problem 'nosuch'" not in out
    rc, out = _cli(capsys, "profile", "cpu/nosuch")
    assert rc == 2 and "suite 'cpu' has no problem 'nosuch'; problems: adamw, add_rmsnorm_matmul" in out
    assert '"' not in out and "['" not in out  # a message, not a KeyError's repr
    rc, out = _cli(capsys, "profile", "nosuch/silu")
    assert rc == 2 and "no suite named 'nosuch'" in out
    rc, out = _cli(capsys, "remeasure", "no-such-run")
    assert rc == 2  # the same mistake, the same exit status


@pytest.fixture
def suite_with_a_broken_problem(tmp_path: Path) -> Path:
    """A copy of three problems of the cpu suite, one of them with a malformed definition."""
    src = suites.suite_dir("cpu")
    dst = tmp_path / "mysuite"
    dst.mkdir()
    shutil.copy(src / "suite.json", dst / "suite.json")
    for name in ("silu", "swiglu", "matmul"):
        shutil.copytree(src / name, dst / name)
    (dst / "matmul" / "definition.json").write_text('{"name": "matmul", "axes": ')  # cut short
    return dst


def test_a_broken_problem_not_asked_for_is_a_warning(suite_with_a_broken_problem):
    suite = str(suite_with_a_broken_problem)
    warnings: list[str] = []
    problems = load_problems(
        build_config(overrides=[f"suite={suite}", "problems=[silu]"]), on_warning=warnings.append
    )
    assert [p.name for p in problems] == ["silu"]
    assert (
        len(warnings) == 1 and "problem 'matmul' skipped" in warnings[0] and "definition.json" in warnings[0]
    )
    for asked in ("problems=[matmul]", "problems=[silu,matmul]"):
        with pytest.raises(ConfigError, match=r"problem 'matmul': .*definition\.json"):
            load_problems(build_config(overrides=[f"suite={suite}", asked]))
    with pytest.raises(ConfigError, match="name the problems to run with --problems"):  # the whole suite
        load_problems(build_config(overrides=[f"suite={suite}"]))


def test_the_cli_warns_about_it_and_goes_on(capsys, monkeypatch, suite_with_a_broken_problem, tmp_path):
    # the run stops at the next check (preflight: no API key), after the problems loaded
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    rc, out = _cli(
        capsys,
        "run",
        "--suite",
        str(suite_with_a_broken_problem),
        "--problems",
        "silu",
        "--model",
        "openai/gpt-4o-mini",
        "--root",
        str(tmp_path / "runs"),
    )
    assert rc == 2 and "Traceback" not in out and "ProblemFileError" not in out
    assert "warning: suite" in out and "problem 'matmul' skipped" in out
    assert "optimizing 1 problem(s)" in out and "preflight failed" in out


def test_profile_of_a_kernel_its_device_cannot_run_is_the_message_only(tmp_path):
    """A C problem in a suite for trn1: exit 2 and one message naming the devices that run C,
    no traceback (as `run` refuses it). A host without the Neuron SDK no longer refuses NKI
    problems: their kernels run in the emulator (tests/hardware_agents/neuron). A real
    subprocess: no stand-in SDK of another test can be on its path."""
    src = suites.suite_dir("cpu")
    suite = tmp_path / "trn"
    shutil.copytree(src / "silu", suite / "silu")
    info = json.loads((src / "suite.json").read_text())
    (suite / "suite.json").write_text(json.dumps({**info, "name": "trn", "device": "trn1"}))
    out = subprocess.run(
        [sys.executable, "-m", "cli.main", "profile", f"{suite}/silu"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    text = out.stdout + out.stderr
    assert out.returncode == 2, text
    assert "Traceback" not in text
    assert "written in c, which device 'trn1' cannot run" in text and "devices that run c: cpu" in text


def _options(parser: argparse.ArgumentParser, path: str):
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from _options(sub, f"{path} {name}")
        elif not isinstance(action, argparse._HelpAction):
            yield path, action


def test_every_option_says_what_it_does():
    missing = [
        f"{path} {'/'.join(a.option_strings) or a.dest}"
        for path, a in _options(build_parser(), "accelopt")
        if not (a.help or "").strip()
    ]
    assert missing == []
    helps = {
        path: a.help for path, a in _options(build_parser(), "accelopt") if "--preset" in a.option_strings
    }
    assert set(helps) == {"accelopt run", "accelopt demo", "accelopt up"}
    assert all("default quick" in h and "quick (B=2 N=2 K=1 T=3)" in h for h in helps.values())
    # every command named in a help text exists
    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    commands = set(sub.choices)
    for path, a in _options(build_parser(), "accelopt"):
        for word in (a.help or "").split("accelopt ")[1:]:
            assert word.split()[0].strip("`,.;:()") in commands, f"{path}: {a.help}"


def test_log_lines_on_the_command_line_are_for_people(capsys, monkeypatch):
    from accelopt.logging import get_logger

    monkeypatch.delenv("ACCELOPT_LOG_FORMAT", raising=False)
    _cli(capsys, "suite", "list")  # stderr is not a terminal here: the library alone would write JSON
    get_logger(component="deployment").warning("actors not ready", actors=["profiler-trn1-0"])
    err = capsys.readouterr().err
    assert "actors not ready" in err and not err.lstrip().startswith("{")
    _cli(capsys, "--log-format", "json", "suite", "list")
    get_logger(component="deployment").warning("asked for")
    assert json.loads(capsys.readouterr().err.strip().splitlines()[-1])["event"] == "asked for"


def test_a_run_whose_every_baseline_failed_is_not_a_success(synthetic_view):
    from accelopt.profile import Profile
    from cli.session import nothing_optimized

    view = synthetic_view
    assert nothing_optimized(view) is None
    first, *rest = view.problems.values()
    view.kernels[first.baseline_id].profile = Profile(status="compile_error", device="cpu", log="error: x")
    assert nothing_optimized(view) is None  # the other problem was optimized
    for p in rest:
        view.kernels[p.baseline_id].profile = Profile(status="runtime_error", device="cpu")
    why = nothing_optimized(view)
    assert why is not None and f"{first.name}: compile_error" in why and "runtime_error" in why


@pytest.fixture
def synthetic_view():
    from replay.fold import RunView
    from replay.synthetic import synthetic_run

    return RunView.from_events(
        synthetic_run(run_id="nothing", problems=2, overrides=("search.iterations=1",))
    )


def test_the_languages_a_run_checks_are_the_agents_own():
    """`agent_languages` (what `run` refuses by) says what each agent class runs: the device
    families' descriptors declare theirs apart (making a Triton agent imports torch), so this
    keeps the two equal."""
    from hardware_agents.cpu.agent import CpuAgent
    from hardware_agents.families import agent_languages
    from hardware_agents.neuron import Trn1Agent, Trn2Agent
    from hardware_agents.triton import AGENTS

    classes = {"cpu": CpuAgent, "trn1": Trn1Agent, "trn2": Trn2Agent, **AGENTS}
    assert set(AGENTS) == {"h100", "h200", "b200"}
    for kind, cls in classes.items():
        assert agent_languages(kind) == tuple(cls.languages), kind
    assert agent_languages("no-such-kind") is None
