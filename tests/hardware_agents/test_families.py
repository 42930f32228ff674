"""The registry of device families (`hardware_agents/families.py`) and their descriptors
(`hardware_agents/family.py`): every lookup the layers above make, on the real built-in
families; a plugin's family registered into the registry and forgotten afterwards."""

from __future__ import annotations

import inspect
from typing import Any

import pytest

from hardware_agents import families
from hardware_agents.base import HardwareAgent
from hardware_agents.families import (
    FAMILIES,
    agent_languages,
    available_devices,
    family_of,
    get_agent,
    get_family,
    kinds_running,
    profile_timeout_s,
    register_family,
    registered_kinds,
    run_refusal,
)
from hardware_agents.family import AgentOption, Capabilities, DeviceFamily, DeviceKind
from hardware_agents.languages import get_language


def _agent_classes() -> dict[str, type[HardwareAgent]]:
    from hardware_agents.cpu.agent import CpuAgent
    from hardware_agents.neuron.agent import Trn1Agent, Trn2Agent
    from hardware_agents.sim.agent import SimAgent
    from hardware_agents.triton.agent import AGENTS

    return {"cpu": CpuAgent, "trn1": Trn1Agent, "trn2": Trn2Agent, "sim": SimAgent, **AGENTS}


def test_the_built_in_families_serve_every_built_in_kind_once():
    assert [f.name for f in FAMILIES] == ["cpu", "triton", "neuron", "sim"]
    kinds = [k for f in FAMILIES for k in f.kind_names()]
    assert sorted(kinds) == sorted(_agent_classes()) and len(set(kinds)) == len(kinds)
    assert {k: family_of(k).name for k in ("cpu", "h100", "b200", "trn2", "sim")} == {
        "cpu": "cpu",
        "h100": "triton",
        "b200": "triton",
        "trn2": "neuron",
        "sim": "sim",
    }
    assert family_of("no-such-kind") is None
    with pytest.raises(KeyError, match="no device family 'nosuch'"):
        get_family("nosuch")


def test_each_family_declares_exactly_its_agents_options():
    """The options a run config's `devices.<kind>.options` is checked against are the keyword
    parameters of the agent the family makes: none missing (an honest option refused), none
    extra (a wrong one let through to fail inside a profiler)."""
    classes = _agent_classes()
    for family in FAMILIES:
        for kind in family.kind_names():
            params = inspect.signature(classes[kind].__init__).parameters
            keywords = {n for n, p in params.items() if n != "self" and p.kind is not p.VAR_KEYWORD}
            assert {o.name for o in family.options} == keywords, kind


def test_each_family_makes_the_agent_of_its_kind():
    agent = get_agent("cpu", calibrate_if_missing=False)
    assert type(agent).__name__ == "CpuAgent" and agent.kind == "cpu"
    assert type(get_agent("trn2", mode="emulate")).__name__ == "Trn2Agent"
    with pytest.raises(KeyError, match="no hardware agent for device kind 'nosuch'"):
        get_agent("nosuch")


def test_option_errors_name_an_unknown_option_and_a_wrong_type_and_pass_honest_ones():
    cpu, neuron = get_family("cpu"), get_family("neuron")
    assert cpu.option_errors("cpu", {"threads": 4, "cc": "gcc", "max_pct_peak": 1}) == []
    assert neuron.option_errors("trn1", {"core": "3", "mode": "emulate"}) == []
    assert neuron.option_errors("trn1", {"core": 3}) == []
    (unknown,) = cpu.option_errors("cpu", {"gpus_to_use": [0]})
    assert "devices.cpu.options.gpus_to_use: the cpu agent has no option 'gpus_to_use'" in unknown
    assert "threads" in unknown  # names the options it has
    (wrong,) = neuron.option_errors("trn1", {"mode": "fast"})
    assert wrong.startswith("devices.trn1.options.mode:")


def test_the_languages_come_with_their_families():
    assert agent_languages("cpu") == ("c",) and agent_languages("h200") == ("triton", "python")
    assert agent_languages("trn1") == ("nki",) and agent_languages("nosuch") is None
    for family in FAMILIES:
        for lang in family.languages:
            assert get_language(lang.name) is lang
    assert kinds_running("nki") == ["trn1", "trn2"]
    # the simulated device takes a kernel in any language: none is refused, it is named for none
    assert agent_languages("sim") is None and "sim" not in kinds_running("c")


def test_profile_timeouts_are_the_families_unless_the_config_says():
    from accelopt.config import build_config

    assert [profile_timeout_s(k) for k in ("cpu", "h100", "trn1", "sim", "nosuch")] == [60, 300, 900, 60, 60]
    assert profile_timeout_s("trn1", build_config(overrides=["profiling.timeout_s=5"]).profiling) == 5.0


def test_the_simulated_family_refuses_a_run_without_the_opt_in(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.delenv("ACCELOPT_ALLOW_SIM", raising=False)
    assert run_refusal(["cpu", "h100"], {}) is None
    why = run_refusal(["cpu", "sim"], {})
    assert why is not None and "simulated device" in why and "ACCELOPT_ALLOW_SIM" in why
    assert run_refusal(["sim"], {"sim": {"allow": True}}) is None
    assert "sim" not in available_devices() and "sim" in registered_kinds()


class _Fake:
    """Stands in for a plugin's agent: what the registry hands back is what the family made."""

    def __init__(self, *, x: int = 0) -> None:
        self.x = x


def _fake_family(**kw: Any) -> DeviceFamily:
    fields: dict[str, Any] = dict(
        name="fake",
        kinds=(DeviceKind(name="fake-test-device", hardware="nothing"),),
        runs=("c",),
        make_agent=lambda kind, **options: _Fake(**options),
        options=(AgentOption("x", int),),
        capabilities=Capabilities(simulated=True),
        probe=lambda: False,
    )
    return DeviceFamily(**{**fields, **kw})


def test_a_registered_family_is_found_and_forgotten_with_its_index(monkeypatch: pytest.MonkeyPatch):
    families.list_families()  # plugins loaded before the index is kept
    monkeypatch.setattr(families, "_index", families._index)  # put back after the test
    register_family(_fake_family())
    agent = get_agent("fake-test-device", x=1)
    assert isinstance(agent, _Fake) and agent.x == 1
    assert "fake-test-device" in registered_kinds() and "fake-test-device" not in available_devices()
    assert agent_languages("fake-test-device") == ("c",)
    with pytest.raises(ValueError, match="kind 'cpu' belongs to family 'cpu'"):
        register_family(_fake_family(name="other", kinds=(DeviceKind(name="cpu", hardware="x"),)))


def test_a_bad_descriptor_is_refused():
    with pytest.raises(ValueError, match="must be distinct and not empty"):
        _fake_family(kinds=())
    with pytest.raises(ValueError, match="is not a subject token"):
        _fake_family(kinds=(DeviceKind(name="a.b", hardware="x"),))
