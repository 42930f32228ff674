"""deploy/: the Ray cluster config, the NATS cluster configs and compose file are valid and
declare the resources AccelOpt's profiler actors ask for."""

from __future__ import annotations

import subprocess
import tomllib

import pytest
import yaml
from testdirs import REPO

from actors.runtime.hosting import device_placement
from events.server import nats_server_binary

DEPLOY = REPO / "deploy"


def test_ray_cluster_declares_device_resources():
    cfg = yaml.safe_load((DEPLOY / "ray-cluster-aws.yaml").read_text())
    types = cfg["available_node_types"]
    assert cfg["head_node_type"] == "head" and types["head"]["resources"].get("GPU", 0) == 0
    instance = {name: t["node_config"]["InstanceType"] for name, t in types.items()}
    assert instance["trn1"] == "trn1.32xlarge" and instance["trn2"] == "trn2.48xlarge"
    assert instance["p5"] == "p5.48xlarge"
    # what each device's profiler actor requests must exist on some node type
    for device, node in (("trn1", "trn1"), ("trn2", "trn2"), ("h100", "p5"), ("cpu", "head")):
        placement = device_placement(device)
        have = types[node]["resources"]
        for res, amount in placement.resources.items():
            assert have.get(res, 0) >= amount, (device, res)
        assert have.get("GPU", 0) >= placement.num_gpus, device
        assert have.get("CPU", 0) >= placement.num_cpus, device
    assert types["trn1"]["resources"]["neuron_cores"] == 32
    assert types["p5"]["resources"]["GPU"] == 8


def test_nats_cluster_configs_are_valid_for_nats_server():
    for i in (1, 2, 3):
        conf = DEPLOY / "nats" / f"nats-{i}.conf"
        r = subprocess.run(
            [nats_server_binary(), "-t", "-c", str(conf)], capture_output=True, text=True, timeout=30
        )
        assert r.returncode == 0, r.stderr
        text = conf.read_text()
        assert f"server_name: nats-{i}" in text and "jetstream" in text
        assert all(f"nats-route://nats-{j}:6222" in text for j in (1, 2, 3))


def test_compose_runs_three_nodes_with_their_configs():
    compose = yaml.safe_load((DEPLOY / "nats" / "docker-compose.yaml").read_text())
    services = compose["services"]
    assert sorted(services) == ["nats-1", "nats-2", "nats-3"]
    for name, svc in services.items():
        assert any(v.startswith(f"./{name}.conf:") for v in svc["volumes"])
        assert (DEPLOY / "nats" / f"{name}.conf").exists()
    ports = [p.split(":")[0] for s in services.values() for p in s["ports"]]
    assert len(ports) == len(set(ports))


def test_worker_image_installs_the_pinned_project():
    text = (DEPLOY / "Dockerfile.worker").read_text()
    assert "constraints.txt" in text and 'ENTRYPOINT ["accelopt"]' in text
    packages = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]["find"]
    for package in (name.rstrip("*") for name in packages["include"]):  # every package the project installs
        assert f"COPY {package} {package}" in text


def test_worker_count_gives_each_profiler_its_own_device(monkeypatch):
    """`accelopt worker --count N`: profiler i takes slot i of its family's devices
    (`DeviceSlots`: GPU i, NeuronCore i of NEURON_RT_VISIBLE_CORES when set)."""
    from hardware_agents.families import SlotError, device_slot

    monkeypatch.delenv("NEURON_RT_VISIBLE_CORES", raising=False)
    assert [device_slot("trn1", i, 4) for i in range(4)] == [{"core": str(i)} for i in range(4)]
    assert [device_slot("h100", i, 2) for i in range(2)] == [{"gpus_to_use": [0]}, {"gpus_to_use": [1]}]
    assert device_slot("trn2", 0, 1) == {} and device_slot("cpu", 1, 2) == {}
    monkeypatch.setenv("NEURON_RT_VISIBLE_CORES", "8,9")
    assert [device_slot("trn1", i, 2) for i in range(2)] == [{"core": "8"}, {"core": "9"}]
    with pytest.raises(SlotError, match="lists 2 core"):
        device_slot("trn1", 0, 3)


def test_profilers_ask_for_their_generation_where_the_cluster_labels_it(monkeypatch):
    import actors.runtime.hosting as hosting

    labels = {
        "CPU": 8.0,
        "GPU": 8.0,
        "neuron_cores": 96.0,
        "accelerator_type:trn1": 1.0,
        "accelerator_type:trn2": 1.0,
        "accelerator_type:H100": 1.0,
    }
    monkeypatch.setattr(hosting, "_cluster_resources", lambda: labels)
    assert device_placement("trn1").resources == {"neuron_cores": 1, "accelerator_type:trn1": 0.001}
    assert device_placement("trn2").resources == {"neuron_cores": 1, "accelerator_type:trn2": 0.001}
    h100 = device_placement("h100")
    assert h100.num_gpus == 1 and h100.resources == {"accelerator_type:H100": 0.001}
    assert device_placement("h200").resources == {}  # no H200 node: placed by GPU count alone
    # the generation labels this repository's cluster config declares are the ones asked for
    declared = {
        k
        for node in yaml.safe_load((DEPLOY / "ray-cluster-aws.yaml").read_text())[
            "available_node_types"
        ].values()
        for k in node.get("resources", {})
    }
    assert {"accelerator_type:trn1", "accelerator_type:trn2", "accelerator_type:H100"} <= declared
