"""Devices and LLM providers from another installed package, found through entry points
(`accelopt.devices`, `accelopt.llm_providers`; `accelopt/plugins.py`), with no edit here.

`acme_plugin/` is laid out as an installed distribution (a `.dist-info` with
`entry_points.txt` next to its modules); putting it on PYTHONPATH installs it as far as
`importlib.metadata` is concerned. It declares a working device kind (`acmecpu`), a working
provider (`mycorp`, answering with the offline tuner since no LLM API is reachable here)
and one broken entry point of each group. Each test runs in a fresh interpreter so the
plugin is discovered the way a user's process discovers it."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

from runlog import last_decision

from accelopt import catalog as c
from events.logfile import read_events

PLUGIN_DIR = Path(__file__).parent / "acme_plugin"


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(PLUGIN_DIR), env.get("PYTHONPATH")) if p)
    return env


def _python(code: str) -> subprocess.CompletedProcess[str]:
    out = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, env=_env(), timeout=300
    )
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    return out


def test_a_device_plugin_registers_its_kind_and_a_broken_one_is_named():
    out = _python("""
        from hardware_agents import get_agent, registered_kinds
        from hardware_agents.cpu.agent import CpuAgent
        kinds = registered_kinds()
        assert "acmecpu" in kinds and "cpu" in kinds, kinds
        assert type(get_agent("acmecpu")) is CpuAgent
        try:
            get_agent("nosuchdevice")
        except KeyError as e:
            print("ERROR", e.args[0])
        else:
            raise SystemExit("no KeyError")
    """)
    error = out.stdout.split("ERROR", 1)[1]
    assert "'acmecpu'" in error  # among the registered kinds
    assert "broken (acme_missing_module:register): ModuleNotFoundError" in error
    assert "plugin_failed" in out.stderr  # and logged when it failed


def test_an_llm_provider_plugin_serves_its_models_through_the_gateway():
    out = _python("""
        import asyncio
        from accelopt.config import LLMConfig, RoleLLM
        from accelopt.plugins import LLM_PROVIDER_GROUP, plugin_failures
        from accelopt.records import ChatMessage
        from actors.llm.gateway import LLMGateway

        gw = LLMGateway(LLMConfig(default=RoleLLM(model="mycorp/coder-1", retries=0), allow_unpriced=True))
        calls = asyncio.run(gw.complete("summarizer", [ChatMessage(role="user", content="No kernels here")],
                                        run_id="r", request_id="q"))
        print("CALLS", len(calls), calls[-1].model, calls[-1].error, repr(calls[-1].response[:60]))
        for f in plugin_failures(LLM_PROVIDER_GROUP):
            print("FAILED", f.name, f.error)
    """)
    calls = out.stdout.split("CALLS", 1)[1].splitlines()[0]
    assert calls.startswith(" 1 mycorp/coder-1 None "), out.stdout  # one attempt, no error
    assert "No optimization found" in calls  # the tuner's summarizer answer, via the plugin
    assert "FAILED notallm TypeError: entry point 'notallm' is not a litellm.CustomLLM" in out.stdout


def test_a_run_uses_both_plugins_in_its_ray_actors(tmp_path):
    """The profiler and LLM roles run in Ray actor processes: they find the plugins too."""
    root = tmp_path / "runs"
    out = subprocess.run(
        # one of the cheapest CPU problems to profile; the memory and the end-of-problem
        # re-measure are not what this test looks at
        [
            sys.executable,
            "-m",
            "cli.main",
            "run",
            "--problems",
            "cpu/rmsnorm_matmul@acmecpu",
            "--preset",
            "quick",
            "--model",
            "mycorp/coder-1",
            "--price",
            "0",
            "0",
            "--root",
            str(root),
            "--memory",
            str(tmp_path / "memory"),
            "--timeout",
            "600",
            "--set",
            "search.iterations=1",
            "--set",
            "search.beam_width=1",
            "--set",
            "search.plans_per_candidate=1",
            "--set",
            "memory.enabled=false",
            "--set",
            "search.remeasure_rounds=0",
        ],
        capture_output=True,
        text=True,
        env=_env(),
        timeout=900,
    )
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    (log,) = root.glob("*/log.aolog")
    events = read_events(log)
    started = events[0]
    assert isinstance(started, c.RunStarted)
    assert [(t.problem.name, t.device) for t in started.targets] == [("rmsnorm_matmul", "acmecpu")]
    end = last_decision(events)
    assert isinstance(end, c.RunCompleted) and end.reason == "completed"
    calls = [e for e in events if isinstance(e, c.LLMCallCompleted)]
    assert calls and all(e.model == "mycorp/coder-1" and e.error is None for e in calls)
    requests = [e for e in events if isinstance(e, c.ProfileRequested)]
    assert requests and all(e.device == "acmecpu" for e in requests)
    profiled = [e for e in events if isinstance(e, c.KernelProfiled)]
    assert sum(e.profile.status == "passed" for e in profiled) >= 2  # the baseline and a candidate
