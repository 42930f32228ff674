"""The Neuron agent around the device path: the missing-SDK error, the simulate mode
(`unmeasured`), mode selection, core pinning, the registry and Ray placement, and the
profiler-summary parser. The simulate-mode tests run the STAND-IN SDK (tests/hardware_agents/neuron/standin)."""

from __future__ import annotations

import msgspec
import pytest
from neuron_helpers import STANDIN

from accelopt.problem import Problem
from actors.runtime.hosting import device_placement
from hardware_agents import available_devices, get_agent, registered_kinds
from hardware_agents.neuron import COUNTER_FIELDS, NeuronSDKMissing, Trn1Agent, Trn2Agent, parse_summary
from hardware_agents.neuron.agent import extend_seeds, lower_precision
from hardware_agents.neuron.profile_summary import SummaryError


def test_missing_sdk_names_the_neuron_sdk_and_how_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ACCELOPT_NEURON_SDK_PATH", raising=False)
    assert {"trn1", "trn2"} <= set(registered_kinds())
    for kind in ("trn1", "trn2"):
        for mode in ("device", "simulate"):  # what needs the real SDK says so
            with pytest.raises(NeuronSDKMissing) as err:
                get_agent(kind, mode=mode)
            msg = str(err.value)
            assert f"The {kind} hardware agent needs the AWS Neuron SDK" in msg
            assert "neuronx-cc" in msg and "neuronxcc.nki" in msg and "neuron-profile" in msg
            assert "--extra-index-url https://pip.repos.neuron.amazonaws.com" in msg
            assert "placeholders" in msg
        agent = get_agent(kind)  # without the SDK: the emulator
        try:
            assert agent.mode == "emulate" and agent.toolchain()["mode"] == "emulate"
        finally:
            agent.close()
    assert {"trn1", "cpu"} <= set(available_devices())


def test_sdk_on_a_path_makes_the_kinds_available(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ACCELOPT_NEURON_SDK_PATH", str(STANDIN))
    assert {"trn1", "trn2"} <= set(available_devices())
    agent = get_agent("trn2")
    try:
        assert isinstance(agent, Trn2Agent) and agent.mode == "simulate"  # no /dev/neuron* here
        assert agent.toolchain()["neuronx-cc"] == "0.0.0+accelopt.standin"
    finally:
        agent.close()


def test_simulate_mode_checks_correctness_and_is_unmeasured(small_suite: dict[str, Problem]) -> None:
    agent = Trn2Agent(mode="auto", sdk_path=[str(STANDIN)], timeout_s=60)
    try:
        assert agent.mode == "simulate"
        p = small_suite["silu"]
        prof = agent.profile(p, p.baseline)
        assert prof.status == "unmeasured" and "nki.simulate_kernel" in prof.log
        assert prof.latency is None and prof.peak_fraction is None
        assert len(prof.correctness) == 6 and all(c.passed for c in prof.correctness)
        assert prof.toolchain["neuron_platform_target_override"] == "trn2"
        from neuron_kernels import SILU_BAD_VALUES, SILU_MUTATES_INPUT

        for src, status in ((SILU_BAD_VALUES, "incorrect"), (SILU_MUTATES_INPUT, "incorrect")):
            sol = msgspec.structs.replace(
                p.baseline, sources=[msgspec.structs.replace(p.baseline.sources[0], content=src)]
            )
            bad = agent.profile(p, sol)
            assert bad.status == status, bad.log
        assert "modified its input argument(s) [0]" in bad.log
    finally:
        agent.close()


def test_device_mode_without_neuron_profile_is_unmeasured(small_suite: dict[str, Problem], tmp_path) -> None:
    agent = Trn1Agent(
        mode="device", sdk_path=[str(STANDIN)], neuron_profile=str(tmp_path / "missing"), check_instance=False
    )
    try:
        agent.neuron_profile = None  # as on a host without aws-neuronx-tools
        p = small_suite["silu"]
        prof = agent.profile(p, p.baseline)
        assert prof.status == "unmeasured" and "aws-neuronx-tools" in prof.log
    finally:
        agent.close()


def test_core_pinning_from_the_ray_assigned_cores(monkeypatch: pytest.MonkeyPatch) -> None:
    # Ray sets NEURON_RT_VISIBLE_CORES for an actor that holds `neuron_cores` resources. The
    # placement depends on the cluster Ray is connected to (an earlier test may have started
    # one in this process): a cluster with NeuronCores, then one without (the agent emulates).
    import actors.runtime.hosting as hosting

    monkeypatch.setattr(hosting, "_cluster_resources", lambda: {"CPU": 2.0, "neuron_cores": 2.0})
    assert device_placement("trn1").options() == {"num_cpus": 0.0, "resources": {"neuron_cores": 1}}
    assert device_placement("trn2").resources == {"neuron_cores": 1}
    monkeypatch.setattr(hosting, "_cluster_resources", lambda: {"CPU": 2.0})
    assert device_placement("trn1").options() == {"num_cpus": 0.0}
    monkeypatch.setenv("NEURON_RT_VISIBLE_CORES", "5")
    agent = Trn1Agent(mode="simulate", sdk_path=[str(STANDIN)])
    try:
        assert agent.core == "5"
        env = agent.child_env()
        assert env["NEURON_RT_VISIBLE_CORES"] == "5" and "NEURON_RT_NUM_CORES" not in env
        assert env["NEURON_CC_FLAGS"].split()[0] == "--auto-cast=none"
    finally:
        agent.close()
    monkeypatch.delenv("NEURON_RT_VISIBLE_CORES")
    agent = Trn1Agent(mode="simulate", sdk_path=[str(STANDIN)], cc_flags="-O2")
    try:
        env = agent.child_env()
        assert env["NEURON_RT_NUM_CORES"] == "1" and env["NEURON_CC_FLAGS"] == "--auto-cast=none -O2"
    finally:
        agent.close()


def test_wrong_trainium_generation_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    import hardware_agents.neuron.sdk as sdk

    monkeypatch.setattr(sdk, "instance_type", lambda: "trn2.48xlarge")
    with pytest.raises(ValueError, match=r"cannot time kernels on a trn2\.48xlarge host"):
        Trn1Agent(mode="device", sdk_path=[str(STANDIN)])


def test_seeds_and_precision_rules() -> None:
    assert extend_seeds((0, 21, 42), 5) == (0, 21, 42, 63, 84)  # the reference code's seeds
    assert extend_seeds((7, 28, 49), 5) == (7, 28, 49, 70, 91)
    assert lower_precision("x = nl.ndarray((1,), dtype=nl.bfloat16)") == "bfloat16"
    assert lower_precision("x = 1  # float16 is not used") is None
    assert lower_precision("y = np.float16(1)") == "float16"


def test_summary_parser() -> None:
    full = {"total_time": 0.00123, **{f: i for i, f in enumerate(COUNTER_FIELDS)}}
    s = parse_summary(msgspec.json.encode({"kernel_abc": full}))
    assert s.key == "kernel_abc" and s.total_time_s == 0.00123 and set(s.counters) == set(COUNTER_FIELDS)
    s = parse_summary(
        'INFO: processing\n{"total_time": "2.5e-3", "hfu_estimated_percent": "41.5%", '
        '"hbm_read_bytes": "1,024", "spill_save_bytes": null}\n'
    )
    assert s.total_time_s == 0.0025 and s.counters == {
        "hfu_estimated_percent": 41.5,
        "hbm_read_bytes": 1024.0,
    }
    for bad in (
        "",
        "not json",
        "{}",
        '{"k": {"hbm_read_bytes": 1}}',
        '{"total_time": 0}',
        '{"total_time": "x"}',
    ):
        with pytest.raises(SummaryError):
            parse_summary(bad)
