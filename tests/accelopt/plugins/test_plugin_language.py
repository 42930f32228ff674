"""A new kernel language comes with the device family that runs it: one `register_family`
call (`hardware_agents/families.py`) whose descriptor brings the language.

`toylang_plugin/` ships the toy language `toylang` as another package would: one
registration (`toylang.py`), its prompt templates, and an `accelopt.devices` entry point.
The in-process tests load that module by path and register it into a copy of the registry
(restored afterwards); then the prompts, the reply parsing, the offline tuner, the profiler
actor's solution and the run directory all handle the language with no other edit. The
last tests run fresh interpreters with the plugin installed (on PYTHONPATH): the language
is found through its entry point the first time a prompt asks for it, and a whole
`accelopt run` (real NATS, real Ray actors, the offline `builtin/tuner` model) optimizes
toy kernels on the plugin's `toysim` kind, the simulated device (no toy compiler exists:
latencies are drawn).
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path
from types import ModuleType

import msgspec
import pytest
from runlog import last_decision
from testdirs import LLM

import accelopt.problem as problem_module
import prompts
from accelopt import catalog as c
from accelopt.problem import (
    AxisConst,
    AxisVar,
    Definition,
    Problem,
    TensorSpec,
    Workload,
    one_file_solution,
)
from accelopt.profile import LatencyStats, Profile
from actors.llm.parsing import extract_code
from actors.llm.role_table import render, tuner_reply
from actors.roles.profiler import solution_for
from actors.runtime.session import best_extension
from events.logfile import read_events
from hardware_agents import families
from hardware_agents.languages import (
    KernelLanguage,
    UnknownLanguageError,
    get_language,
    language_names,
    tuner_syntaxes,
)
from hardware_agents.languages.tunables import changes_in, find_tunables

PLUGIN_DIR = Path(__file__).parent / "toylang_plugin"

TOY_SOURCE = """\
param TILE := 64;
param UNROLL := 4; -- inner loop
proc main(x, y, out) {
  for i in tiles(x, TILE) unroll UNROLL { out[i] := 2 * x[i] + y[i]; }
}
end main.
"""


def _load_plugin() -> ModuleType:
    """The plugin module, imported from its file (not via sys.path, so its entry point stays
    invisible to this process's device discovery)."""
    spec = importlib.util.spec_from_file_location("toylang_under_test", PLUGIN_DIR / "toylang.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def toylang(monkeypatch: pytest.MonkeyPatch) -> KernelLanguage:
    # every installed family registered first, so the plugins' loading does not run (and mark
    # itself done) into a registry that is thrown away; registering replaces the registry's
    # index as a whole, so putting the old one back afterwards forgets the plugin's family
    families.list_families()
    monkeypatch.setattr(families, "_index", families._index)
    monkeypatch.setattr(problem_module, "_language_names", set(problem_module._language_names))
    _load_plugin().register()
    return get_language("toylang")


def toy_problem(entry_point: str = "kernel.toy::main") -> Problem:
    d = Definition(
        name="toy_scale_add",
        op_type="elementwise",
        axes={"M": AxisVar(), "N": AxisConst(value=256)},
        inputs={
            "x": TensorSpec(shape=["M", "N"], dtype="float32"),
            "y": TensorSpec(shape=["M", "N"], dtype="float32"),
        },
        outputs={"out": TensorSpec(shape=["M", "N"], dtype="float32")},
        reference="import torch\n\ndef run(x, y):\n    return 2.0 * x + y\n",
        x_numpy_reference="def run(x, y):\n    return 2.0 * x + y\n",
    )
    s = one_file_solution(
        d.name,
        TOY_SOURCE,
        entry_point=entry_point,
        language="toylang",
        device="toydev",
        author="test",
        path="kernel.toy",
    )
    return Problem(definition=d, workload=Workload(uuid="w", axes={"M": 1024}), baseline=s)


def _profile() -> Profile:
    return Profile(
        status="passed",
        device="toydev",
        t_peak_ms=0.4,
        peak_fraction=0.2,
        bound="memory",
        latency=LatencyStats(samples_ms=[2.0, 2.1], median_ms=2.05, min_ms=2.0, max_ms=2.1, spread=0.02),
    )


def _messages(role: str, **ctx) -> list[dict[str, str]]:
    return [{"role": m.role, "content": m.content} for m in render(role, "toylang", device="toydev", **ctx)]


def test_the_builtin_languages_keep_the_facts_the_code_spelled_out_before():
    """The values of the tables the registry replaced (prompts, profiler, session)."""
    table = {
        name: (lang.fence, lang.entry, lang.entry_file, lang.extension, lang.numpy_reference, lang.name)
        for name in ("c", "triton", "python", "nki")
        for lang in [get_language(name)]
    }
    assert table == {
        "c": ("c", "kernel", "kernel.c", ".c", True, "c"),
        "triton": ("python", "run", "main.py", ".py", False, "triton"),
        "python": ("python", "run", "main.py", ".py", False, "triton"),
        "nki": ("python", "kernel", "kernel.py", ".py", True, "nki"),
    }
    assert language_names()[:3] == ("c", "triton", "nki")
    assert "allocates its own outputs" in get_language("nki").output_rule
    assert (
        "filled with NaN" in get_language("c").output_rule
        and "filled with NaN" in get_language("triton").output_rule
    )
    assert get_language("c").complete_source is None and get_language("nki").complete_source is not None


def test_a_plugin_language_is_one_family_registration(toylang):
    assert toylang.name == "toylang" and get_language("toy") is toylang and get_language("TOYLANG") is toylang
    assert "toylang" in language_names()
    assert problem_module.known_language("toylang") and problem_module.known_language("toy")  # solution files
    assert tuner_syntaxes()[-1] is toylang.tuner  # after the built-ins' two syntaxes
    with pytest.raises(
        UnknownLanguageError, match=r"unknown kernel language 'cobol'; known: c, triton, nki, toylang"
    ):
        get_language("cobol")


def test_bad_registrations_are_refused():
    kw = dict(
        fence="x",
        entry="main",
        entry_file="k.x",
        extension=".x",
        interface_lines=lambda p: [],
        output_rule="",
    )
    with pytest.raises(ValueError, match="kernel language name 'Toy Lang'"):
        KernelLanguage(name="Toy Lang", **kw)
    with pytest.raises(ValueError, match=r"extension 'x' must start with '\.'"):
        KernelLanguage(name="toy", **{**kw, "extension": "x"})
    with pytest.raises(prompts.PromptError, match="kernel language 'cobol'"):
        render("planner", "cobol", problem=toy_problem(), source="x", seed=0, request_id="r")


def test_every_prompt_of_a_plugin_language_renders_from_its_own_templates(toylang):
    p = toy_problem()
    ctx = dict(
        problem=p,
        source=TOY_SOURCE,
        profile=_profile(),
        seed=1,
        request_id="r",
        plan="Double TILE",
        error_log="toy: syntax error",
        status="compile_error",
        parent_source=TOY_SOURCE,
        slow_source=TOY_SOURCE,
        fast_source=TOY_SOURCE,
        speedup=1.5,
    )
    for role in prompts.ROLES:
        system, user = render(role, "toylang", device="toydev", **ctx)
        assert not re.search(r"\{\{[a-z_]+\}\}", system.content + user.content)
        assert "```toy\nparam TILE := 64;" in user.content  # the language's fence tag
        if role != "summarizer":
            assert "Tunable constants are `param NAME := <int>;`" in system.content  # its primer
            assert "## Kernel interface\n- One toy module defining `proc main(x, y, out)`" in user.content
            assert (
                "Toy outputs start as zeros; write every element. Timing is done by the harness."
                in user.content
            )
            assert "## Reference implementation (numpy)" in user.content
    # with no problem at hand, the language's default entry name
    system, _ = render(
        "summarizer",
        "toylang",
        problem=None,
        problem_name="p",
        slow_source="a",
        fast_source="b",
        speedup=1.2,
        device="toydev",
    )
    assert "what makes the fast `main` kernel faster" in system.content


def test_the_offline_tuner_tunes_a_plugin_language_through_its_prompts(toylang):
    p = toy_problem()
    assert {t.name: t.value for t in find_tunables(TOY_SOURCE)} == {"TILE": 64, "UNROLL": 4}
    plan = tuner_reply(
        _messages("planner", problem=p, source=TOY_SOURCE, profile=_profile(), seed=3, request_id="r1"),
        "planner",
    )
    change = re.search(r"^CHANGE: (\w+) (\d+) -> (\d+)$", plan, re.MULTILINE)
    assert change is not None, plan
    name, old, new = change.group(1), change.group(2), change.group(3)
    reply = tuner_reply(_messages("executor", problem=p, source=TOY_SOURCE, plan=plan), "executor")
    block = extract_code(reply, entry=p.baseline.entry_symbol)
    assert block.lang == "toy"
    assert f"param {name} := {new};" in block.code and f"param {name} := {old};" not in block.code
    assert toylang.complete_source is not None and toylang.complete_source(block.code, "main") == block.code
    assert toylang.complete_source("proc main() {}", "main").endswith(
        "end main.\n"
    )  # a reply that left it out
    summary = tuner_reply(
        _messages("summarizer", problem=p, slow_source=TOY_SOURCE, fast_source=block.code, speedup=1.3),
        "summarizer",
    )
    assert f"Tuned constants: {name} {old} -> {new}" in summary
    assert f"param {name} := {new};" in summary  # the optimized snippet is the definition line
    diff = "--- slow\n+++ fast\n-param TILE := 64;\n+param TILE := 128;\n"
    assert [(x.name, x.old, x.new) for x in changes_in(diff)] == [("TILE", 64, 128)]


def test_the_executor_agent_completes_a_reply_in_the_plugin_language(toylang, nats_server):
    """The real executor agent on a real nats-server, with the offline tuner as its model: the
    reply's block lacks the module's last line, which the language's `complete_source` adds."""
    sys.path.insert(0, str(LLM))
    from llm_helpers import envelope, llm_config, of_type, run_agent

    run = "toy-impl"
    body = TOY_SOURCE.replace("end main.\n", "")
    request = c.ImplementationRequested(
        **envelope(run, "ImplementationRequested", "plan1", 0),
        problem="toy_scale_add",
        iteration=1,
        candidate_id="k0",
        plan_id="plan1",
        sample_index=0,
        language="toylang",
        device="toydev",
        plan="CHANGE: TILE 64 -> 128",
        candidate_source=body,
    )
    log = asyncio.run(
        run_agent(nats_server.url, "executor", llm_config("builtin/tuner"), run, toy_problem(), [request])
    )
    [kernel] = of_type(log, c.KernelProposed)
    assert kernel.language == "toylang"
    assert kernel.source == body.replace("param TILE := 64;", "param TILE := 128;").rstrip() + "\nend main.\n"


def test_the_profiler_and_the_run_directory_use_the_registered_names(toylang):
    request = c.ProfileRequested(
        event_id="e",
        run_id="run",
        ts=0.0,
        kernel_id="k" * 16,
        problem="toy_scale_add",
        device="toydev",
        language="toylang",
        source=TOY_SOURCE,
    )
    named = solution_for(request, toy_problem().baseline)
    assert named.sources[0].path == "kernel.toy" and named.spec.language == "toylang"
    unnamed = solution_for(request, toy_problem("::main").baseline)
    assert unnamed.sources[0].path == "kernel.toy"  # the language's file name when the baseline has none
    assert best_extension("toylang") == ".toy" and best_extension("toy") == ".toy"
    assert best_extension("c") == ".c" and best_extension("python") == ".py"
    assert best_extension("cobol") == ".txt"  # no registered language: plain text


def _plugin_env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(PLUGIN_DIR), env.get("PYTHONPATH")) if p)
    return env


def test_an_installed_plugin_language_is_found_through_its_entry_point():
    problem_json = msgspec.json.encode(toy_problem()).decode()
    code = textwrap.dedent(f"""
        import msgspec
        from accelopt.problem import Problem, known_language, solution_errors
        from hardware_agents.languages import language_names
        from actors.llm.role_table import render
        assert "toylang" not in language_names()  # nothing registered it yet
        problem = msgspec.json.decode({problem_json!r}, type=Problem)  # the problem file names the language
        assert solution_errors(problem.baseline) == [], solution_errors(problem.baseline)  # found via the plugin
        assert known_language("toylang") and not known_language("cobol")
        system, user = render("executor", "toylang", problem=problem, source=problem.baseline.sources[0].content,
                              plan="Double TILE", device="toydev")
        print("NAMES", ",".join(language_names()))
        print(user.content)
    """)
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=_plugin_env(), timeout=300
    )
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    assert "NAMES c,triton,nki,toylang" in out.stdout
    assert (
        "```toy\nparam TILE := 64;" in out.stdout
        and "Output the complete kernel in one ```toy code block." in out.stdout
    )


def write_toy_suite(root: Path) -> Path:
    """Two toy problems (`t0`, `t1`: out = x * k + 1) whose baselines have two `param`s."""
    folder = root / "toysuite"
    folder.mkdir(parents=True)
    (folder / "suite.json").write_text(
        json.dumps(
            {
                "name": "toysuite",
                "description": "toy-language problems",
                "device": "toysim",
                "language": "toylang",
                "entry_point": "kernel.toy::main",
            }
        )
    )
    for i in range(2):
        d = folder / f"t{i}"
        d.mkdir()
        ref = f"def run(x):\n    return x * {i + 2} + 1\n"
        (d / "definition.json").write_text(
            json.dumps(
                {
                    "name": d.name,
                    "op_type": "elementwise",
                    "axes": {"M": {"type": "var"}, "N": {"type": "var"}},
                    "inputs": {"x": {"shape": ["M", "N"], "dtype": "float32"}},
                    "outputs": {"out": {"shape": ["M", "N"], "dtype": "float32"}},
                    "reference": ref,
                    "x_numpy_reference": ref,
                    "x_roofline": {"flops_vector": "2*M*N", "bytes_min": "4 * (2*M*N)"},
                }
            )
        )
        (d / "workload.json").write_text(
            json.dumps(
                {
                    "uuid": f"00000000-0000-5000-8000-{i:012d}",
                    "axes": {"M": 256, "N": 256},
                    "inputs": {"x": {"type": "random"}},
                }
            )
        )
        (d / "kernel.toy").write_text(
            f"param TILE := 64;\nparam UNROLL := 4;\nproc main(x, out) {{\n"
            f"  out := x * {i + 2} + 1;\n}}\nend main.\n"
        )
    return folder


def test_a_whole_run_optimizes_kernels_of_the_plugin_language(tmp_path, toylang):
    suite = write_toy_suite(tmp_path)
    root = tmp_path / "runs"
    env = {**_plugin_env(), "ACCELOPT_ALLOW_SIM": "1"}  # toysim is the simulated device: opt in
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "cli.main",
            "run",
            "--suite",
            str(suite),
            "--device",
            "toysim",
            "--preset",
            "quick",
            "--model",
            "builtin/tuner",
            "--no-preflight",
            "--root",
            str(root),
            "--memory",
            str(tmp_path / "memory"),
            "--timeout",
            "600",
            "--set",
            "memory.enabled=false",
            "--set",
            "search.iterations=2",
            "--set",
            "devices.toysim.options.profile_s=0.01",
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=900,
    )
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    (log,) = root.glob("*/log.aolog")
    run_dir = log.parent
    events = read_events(log)
    end = last_decision(events)
    assert isinstance(end, c.RunCompleted) and end.reason == "completed"
    started = events[0]
    assert isinstance(started, c.RunStarted)
    assert {(t.problem.name, t.device, t.language) for t in started.targets} == {
        ("t0", "toysim", "toylang"),
        ("t1", "toysim", "toylang"),
    }
    planner = next(e for e in events if isinstance(e, c.LLMCallCompleted) and e.role == "planner")
    user = planner.messages[-1]
    assert "```toy\nparam TILE := 64;" in (user["content"] if isinstance(user, dict) else user.content)
    proposed = [e for e in events if isinstance(e, c.KernelProposed)]
    assert proposed and all(e.language == "toylang" for e in proposed)
    baselines = {p.name: p.baseline.sources[0].content for p in (t.problem for t in started.targets)}
    changed = [e for e in proposed if e.source != baselines[e.problem]]
    assert changed and all(
        find_tunables(e.source) and e.source.rstrip().endswith("end main.") for e in changed
    )
    profiled = [e for e in events if isinstance(e, c.KernelProfiled)]
    assert sum(e.profile.status == "passed" for e in profiled) > len(started.targets)  # candidates too
    assert sorted(p.name for p in (run_dir / "best").iterdir()) == ["t0.toy", "t1.toy"]
