"""The preflight: a run that cannot reach its model says so before it starts (exit 2, one
line naming what to set), with litellm's own provider and key knowledge; and a model that
starts failing mid-run with errors no retry fixes stops the run as `failed`."""

from __future__ import annotations

import asyncio
import io
import os
import socket
from contextlib import redirect_stderr, redirect_stdout

import msgspec
import pytest
from openai_stub import OpenAIStub

from accelopt.config import build_config
from actors.llm import preflight as pf


def _llm(*overrides: str):
    return build_config(overrides=list(overrides)).llm


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_a_missing_provider_key_is_named():
    [line] = pf.check_models(_llm("llm.default.model=claude-sonnet-4-5"), env={})
    assert "ANTHROPIC_API_KEY" in line and "claude-sonnet-4-5" in line
    assert pf.check_models(_llm("llm.default.model=claude-sonnet-4-5"), env={"ANTHROPIC_API_KEY": "k"}) == []


def test_an_unknown_provider_is_named():
    [line] = pf.check_models(_llm("llm.default.model=gpt-9-imaginary"), env={})
    assert "no provider" in line and "gpt-9-imaginary" in line and "PROVIDER/MODEL" in line


def test_each_distinct_model_is_checked_once_with_its_roles():
    llm = _llm("llm.default.model=anthropic/claude-sonnet-4-5", "llm.summarizer.model=openai/gpt-4o-mini")
    lines = pf.check_models(llm, env={})
    assert len(lines) == 2
    assert "(planner, executor, fixer)" in lines[0] and "ANTHROPIC_API_KEY" in lines[0]
    assert "(summarizer)" in lines[1] and "OPENAI_API_KEY" in lines[1]


def test_the_variable_named_by_api_key_env_must_be_set():
    llm = _llm("llm.default.model=openai/gpt-4o-mini", "llm.default.api_key_env=MY_TEAM_KEY")
    [line] = pf.check_models(llm, env={"OPENAI_API_KEY": "not this one"})
    assert "set MY_TEAM_KEY" in line
    assert pf.check_models(llm, env={"MY_TEAM_KEY": "k"}) == []


def test_an_api_base_nobody_listens_on_is_named():
    url = f"http://127.0.0.1:{_closed_port()}/v1"
    [line] = pf.check_models(_llm("llm.default.model=hosted_vllm/m", f"llm.default.api_base={url}"), env={})
    assert url in line and "not reachable" in line


def test_a_self_hosted_server_needs_no_key():
    with OpenAIStub(status=200) as stub:
        llm = _llm("llm.default.model=openai/my-model", f"llm.default.api_base={stub.url}")
        assert pf.check_models(llm, env={}) == []


def test_offline_models_need_no_preflight(scripted):
    assert not pf.needs_preflight(_llm())  # builtin/tuner
    model, _ = scripted([])  # a provider served in this process (tests/shared/scripted_llm.py)
    assert pf.check_models(_llm(f"llm.default.model={model}"), env={}) == []
    assert pf.needs_preflight(_llm("llm.summarizer.model=openai/gpt-4o-mini"))


def test_the_probe_reports_latency_and_a_rejected_key():
    with OpenAIStub(status=200) as ok, OpenAIStub(status=401) as bad:
        llm = _llm(
            "llm.default.model=openai/my-model",
            f"llm.default.api_base={ok.url}",
            "llm.allow_unpriced=true",
            "llm.default.params.top_p=0.5",
            f"llm.summarizer.api_base={bad.url}",
        )
        probes = asyncio.run(pf.probe_models(llm))
    good, rejected = sorted(probes, key=lambda p: p.use.api_base == bad.url)
    assert good.error is None and good.latency_s > 0 and pf.probe_problem(good) is None
    assert good.use.roles == ("planner", "executor", "fixer")
    # tiny: the probe asks for a handful of tokens, with the role's provider parameters
    assert ok.requests[0]["max_tokens"] == pf.PROBE_MAX_TOKENS and ok.requests[0]["top_p"] == 0.5
    assert "AuthenticationError" in (pf.probe_problem(rejected) or "")
    assert len(bad.requests) == 1  # no retries of an authentication error


def _accelopt(*args: str) -> tuple[int, str]:
    """`accelopt ARGS` in this process (the command line a user types; the preflight stops it
    before any server or actor starts), with its exit code and what it printed (stdout, then
    stderr: its errors)."""
    from cli.main import main

    with redirect_stdout(io.StringIO()) as out, redirect_stderr(io.StringIO()) as err:
        code = main(list(args))
    return code, " ".join((out.getvalue() + err.getvalue()).split())


@pytest.fixture
def no_keys(monkeypatch):
    for key in [k for k in os.environ if k.endswith("_API_KEY")]:
        monkeypatch.delenv(key)
    return monkeypatch


def test_run_without_the_key_exits_2_naming_it(tmp_path, no_keys):
    code, text = _accelopt(
        "run", "--problems", "silu", "--model", "claude-sonnet-4-5", "--root", str(tmp_path)
    )
    assert code == 2, text
    assert "set ANTHROPIC_API_KEY" in text and "completed" not in text
    assert not list(tmp_path.glob("*/log.aolog"))


def test_run_with_an_unknown_provider_exits_2_naming_it(tmp_path, no_keys):
    code, text = _accelopt("run", "--problems", "silu", "--model", "gpt-9-imaginary", "--root", str(tmp_path))
    assert code == 2, text
    assert "no provider for 'gpt-9-imaginary'" in text


def test_run_whose_key_is_rejected_fails_at_the_probe(tmp_path, no_keys):
    no_keys.setenv("STUB_KEY", "sk-wrong")
    with OpenAIStub(status=401) as stub:
        code, text = _accelopt(
            "run",
            "--problems",
            "silu",
            "--model",
            "openai/gpt-4o-mini",
            "--api-base",
            stub.url,
            "--set",
            "llm.default.api_key_env=STUB_KEY",
            "--root",
            str(tmp_path),
        )
    assert code == 2, text
    assert "the test call failed: AuthenticationError" in text


def test_a_reachable_model_is_probed_and_its_latency_reported(run_config, capsys):
    from rich.console import Console

    from cli.session import preflight

    with OpenAIStub(status=200) as stub:
        cfg = run_config(
            "llm.default.model=openai/my-model", f"llm.default.api_base={stub.url}", "llm.allow_unpriced=true"
        )
        console = Console(file=io.StringIO(), width=200)
        assert preflight(console, cfg, probe=True)
        assert len(stub.requests) == 1
        assert not preflight(
            console,
            msgspec.structs.replace(cfg, llm=msgspec.structs.replace(cfg.llm, allow_unpriced=False)),
            probe=True,
        )  # no price, no call
        assert len(stub.requests) == 1
    text = " ".join(console.file.getvalue().split())
    assert "preflight: openai/my-model (planner, executor, fixer, summarizer) answered in" in text
    errors = " ".join(capsys.readouterr().err.split())  # errors go to stderr (cli/errors.py)
    assert "preflight failed: no price known for model(s) openai/my-model" in errors
