"""Per-role LLM settings as a strong model gets them: output allowances, the model's own
output limit, provider parameters passed through, and permanent errors marked as such.
The provider is a loopback OpenAI-format server (tests/actors/llm/openai_stub.py); litellm and the
gateway in front of it are the real ones, so these are the bytes a provider would receive."""

from __future__ import annotations

import asyncio

import pytest
from openai_stub import OpenAIStub
from testdirs import LOOP

from accelopt.catalog import LLM_ROLE_TABLE
from accelopt.config import (
    ConfigError,
    RoleLLM,
    apply_overrides,
    build_config,
    config_from_dict,
    recorded_config,
)
from accelopt.records import ChatMessage
from actors.llm.gateway import LLMGateway, max_output_tokens

MSG = [ChatMessage(role="user", content="hi")]


def _call(gw: LLMGateway, role: str):
    return asyncio.run(gw.complete(role, MSG, run_id="r", request_id=f"req-{role}"))


def test_role_allowances_follow_the_papers_settings():
    llm = build_config().llm
    assert llm.for_role("planner").max_tokens >= 10_000
    assert llm.for_role("executor").max_tokens == 65_536
    assert llm.for_role("fixer").max_tokens >= 32_768
    assert 4096 <= llm.for_role("summarizer").max_tokens <= llm.for_role("planner").max_tokens
    assert all(
        llm.for_role(r.name).max_tokens == r.max_tokens for r in LLM_ROLE_TABLE
    )  # the rows' allowances
    # llm.default.max_tokens still sets every role, a role's own key wins over it
    llm = build_config(overrides=["llm.default.max_tokens=768", "llm.roles.fixer.max_tokens=2000"]).llm
    assert [llm.for_role(r).max_tokens for r in ("planner", "executor", "fixer", "summarizer")] == [
        768,
        768,
        2000,
        768,
    ]


OLD_SHAPE = """\
llm:
  default:
    model: openai/gpt-4o
  planner:
    temperature: 0.25
  fixer:
    max_tokens: 2000
    model: null
"""


def test_a_config_with_a_field_per_role_loads_onto_the_roles_mapping(tmp_path):
    """Configs written when each role was a field of `llm` (`llm.planner: {...}`): a file,
    `--set llm.planner.x=...`, a run's recorded config (every role's field, unset keys null)
    load with those settings under `llm.roles`, as the same settings written there would."""
    old = tmp_path / "old.yaml"
    old.write_text(OLD_SHAPE)
    cfg = build_config(file=old, overrides=["llm.summarizer.model=openai/gpt-4o-mini"])
    assert cfg.llm.roles == {
        "planner": RoleLLM(temperature=0.25),
        "fixer": RoleLLM(max_tokens=2000),
        "summarizer": RoleLLM(model="openai/gpt-4o-mini"),
    }
    new = tmp_path / "new.yaml"
    new.write_text(OLD_SHAPE.replace("  planner:", "  roles:\n   planner:").replace("  fixer:", "   fixer:"))
    assert build_config(file=new, overrides=["llm.roles.summarizer.model=openai/gpt-4o-mini"]) == cfg
    assert [cfg.llm.for_role(r).temperature for r in ("planner", "executor")] == [0.25, 1.0]
    assert cfg.llm.for_role("fixer").max_tokens == 2000 and cfg.llm.for_role("fixer").model == "openai/gpt-4o"
    # precedence holds across the two places: a later source wins whichever place it names
    assert build_config(file=old, overrides=["llm.roles.planner.temperature=0.5"]).llm.roles["planner"] == (
        RoleLLM(temperature=0.5)
    )
    assert build_config(file=new, overrides=["llm.planner.temperature=0.5"]).llm.roles["planner"] == (
        RoleLLM(temperature=0.5)
    )
    # a recorded config of the old shape decodes, and an ablation's --set of an old key applies to it
    unset = {k: None for k in ("model", "temperature", "max_tokens", "concurrency", "timeout_s", "retries")}
    recorded = build_config().to_dict()
    del recorded["llm"]["roles"]
    recorded["llm"] |= {r.name: dict(unset) for r in LLM_ROLE_TABLE} | {
        "planner": unset | {"temperature": 0.25}
    }
    assert recorded_config(recorded).llm.roles == {"planner": RoleLLM(temperature=0.25)}
    forked = config_from_dict(apply_overrides(recorded, ["llm.fixer.max_tokens=9"]), source="--set")
    assert forked.llm.roles == {"planner": RoleLLM(temperature=0.25), "fixer": RoleLLM(max_tokens=9)}
    # one role in both places of one mapping: which is meant is not said
    both = tmp_path / "both.yaml"
    both.write_text(OLD_SHAPE + "  roles:\n    planner:\n      temperature: 0.5\n")
    with pytest.raises(
        ConfigError, match=r"both.yaml: llm.planner and llm.roles.planner: the role's settings twice"
    ):
        build_config(file=both)
    with pytest.raises(ConfigError, match=r"llm.roles.plannr: unknown role; the roles are planner, executor"):
        build_config(overrides=["llm.roles.plannr.model=openai/gpt-4o"])


def test_provider_params_merge_and_reserved_keys_are_refused():
    llm = build_config(
        overrides=[
            "llm.default.params.top_p=0.9",
            "llm.roles.executor.params.reasoning_effort=medium",
            "llm.roles.executor.params.extra_body={chat_template_kwargs: {thinking: true}}",
        ]
    ).llm
    assert llm.for_role("planner").params == {"top_p": 0.9}
    assert llm.for_role("executor").params == {
        "top_p": 0.9,
        "reasoning_effort": "medium",
        "extra_body": {"chat_template_kwargs": {"thinking": True}},
    }
    with pytest.raises(ConfigError, match=r"llm\.roles\.planner\.params: max_tokens have their own keys"):
        build_config(overrides=["llm.roles.planner.params.max_tokens=5"])


def test_what_the_provider_receives_per_role():
    with OpenAIStub(status=200, text="```c\nint x;\n```") as stub:
        llm = build_config(
            overrides=[
                "llm.default.model=openai/gpt-4o",
                f"llm.default.api_base={stub.url}",
                "llm.default.retries=0",
                "llm.roles.executor.params.top_p=0.5",
                "llm.roles.executor.params.extra_body={seed_hint: 7}",
                "llm.roles.planner.max_tokens=12000",
            ]
        ).llm
        gw = LLMGateway(llm)
        [planner] = _call(gw, "planner")
        [executor] = _call(gw, "executor")
    first, second = stub.requests
    limit = max_output_tokens("openai/gpt-4o")
    assert limit and limit < 65_536
    assert first["max_tokens"] == min(12000, limit) and "top_p" not in first
    # the executor's 65,536 is capped at the model's output limit; its params go through as they are
    assert second["max_tokens"] == limit and second["top_p"] == 0.5 and second["seed_hint"] == 7
    assert executor.params == {
        "temperature": 1.0,
        "max_tokens": limit,
        "top_p": 0.5,
        "extra_body": {"seed_hint": 7},
    }
    assert planner.error is None and executor.error is None


def test_a_rejected_key_is_one_permanent_attempt_and_a_server_error_is_not_permanent():
    with OpenAIStub(status=401) as bad:
        llm = build_config(
            overrides=[
                "llm.default.model=openai/gpt-4o",
                f"llm.default.api_base={bad.url}",
                "llm.default.retries=2",
            ]
        ).llm
        calls = _call(LLMGateway(llm), "planner")
    assert len(calls) == 1 and calls[0].permanent and calls[0].error.startswith("AuthenticationError")
    with OpenAIStub(status=503) as down:
        llm = build_config(
            overrides=[
                "llm.default.model=openai/gpt-4o",
                f"llm.default.api_base={down.url}",
                "llm.default.retries=1",
            ]
        ).llm
        calls = _call(LLMGateway(llm, backoff_base_s=0.01), "planner")
    assert len(calls) == 2 and not any(c.permanent for c in calls) and all(c.error for c in calls)


def test_profiling_timeouts_per_device_kind():
    """The default limit is the kind's family's (`DeviceFamily.profile_timeout_s`); the config
    overrides it per kind or for every kind."""
    from hardware_agents.families import profile_timeout_s

    p = build_config().profiling
    assert [profile_timeout_s(k, p) for k in ("cpu", "h100", "trn1", "trn2")] == [60.0, 300.0, 900.0, 900.0]
    assert profile_timeout_s("some-plugin-device", p) == 60.0
    p = build_config(overrides=["profiling.device_timeout_s.trn1=1800"]).profiling
    assert profile_timeout_s("trn1", p) == 1800.0 and profile_timeout_s("h100", p) == 300.0
    p = build_config(overrides=["profiling.timeout_s=45"]).profiling  # one value for every kind
    assert profile_timeout_s("trn1", p) == 45.0 and profile_timeout_s("cpu", p) == 45.0
    with pytest.raises(ConfigError, match=r"profiling\.device_timeout_s\.h100"):
        build_config(overrides=["profiling.device_timeout_s.h100=0"])


def test_a_budget_stop_says_how_to_go_on():
    import sys

    sys.path.insert(0, str(LOOP))
    from sim import problem

    from accelopt import catalog as c
    from cli.session import budget_note
    from replay.fold import RunView

    env = {"run_id": "r1", "ts": 0.0}
    events = [
        c.RunStarted(event_id="s", config=build_config().to_dict(), seed=0, targets=[problem("a")], **env),
        *(
            c.IterationCompleted(
                event_id=f"i{i}",
                problem="a",
                iteration=i,
                best_kernel_id="k",
                best_latency_ms=1.0,
                kernels_profiled=1,
                **env,
            )
            for i in (0, 1, 2)
        ),
        c.BudgetExceeded(event_id="b", spent_usd=50.01, budget_usd=50.0, **env),
    ]
    view = RunView.from_events(events)
    note = budget_note(view)
    assert "spent $50.0100 of $50.00" in note
    assert "accelopt ablate r1 --from-iteration 2 --set llm.budget_usd=100" in note
