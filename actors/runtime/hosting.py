"""Ray hosting of AccelOpt's actors.

Every actor is a plain asyncio object with `run()` and `stop()` (a `Worker` or the
coordinator service). `ActorHost` is the one Ray actor class that hosts any of them: it
builds the object of an actor role (`ACTOR_ROLES`; `actor_class` is the one table of what
each role is) from keyword arguments inside the actor process and runs it. Placement is by
Ray resources: profilers declare what their device family's descriptor names (`num_gpus`, a
custom resource such as `neuron_cores`, or CPU cores); LLM roles and the coordinator need none. Ray restarts a dead host
(`max_restarts`) and re-submits its `run()` call on the new process (`max_task_retries`), so a
killed actor comes back and resumes consuming; JetStream redelivers what it had not acked.
"""

from __future__ import annotations

import typing
from dataclasses import dataclass, field
from typing import Any, Literal

import accelopt  # noqa: F401  (offline environment defaults, also inside Ray workers)
from accelopt import catalog as ev

ActorRole = Literal[ev.Role, "profiler", "curator", "retriever", "coordinator", "group"]
"""What a host can run: the LLM roles (`catalog.LLM_ROLE_TABLE`), a device's profiler, the memory's curator and
retriever, a run's coordinator, and a group of several of these in one process."""
ACTOR_ROLES: tuple[ActorRole, ...] = typing.get_args(ActorRole)


def actor_class(role: ActorRole) -> type[Any]:
    """The class a host builds for `role`, imported only when one is built: a role's imports
    (litellm for the LLM roles, LanceDB and torch for the memory, a device's toolchain for a
    profiler) load only in the processes that host it. KeyError for a name that is no role."""
    if role not in ACTOR_ROLES:
        raise KeyError(f"unknown actor role {role!r}; the roles are {', '.join(ACTOR_ROLES)}")
    if ev.is_llm_role(role):  # a row of the role table (`actors/llm/role_table.py`)
        from actors.roles.llm_roles import ROLE_WORKERS

        return ROLE_WORKERS[role]
    match role:
        case "profiler":
            from actors.roles.profiler import Profiler

            return Profiler
        case "curator":
            from actors.roles.curator import MemoryCurator

            return MemoryCurator
        case "retriever":
            from actors.roles.retriever import MemoryRetriever

            return MemoryRetriever
        case "coordinator":
            from actors.roles.coordinator import CoordinatorService

            return CoordinatorService
        case "group":
            return ActorGroup
    raise KeyError(f"unknown actor role {role!r}")  # unreachable: checked above


def build(role: ActorRole, kwargs: dict[str, Any]) -> Any:
    """An actor of `role` built from its keyword arguments."""
    return actor_class(role)(**kwargs)


class ActorGroup:
    """Several actors in one process, run side by side on its event loop.

    The LLM roles wait on the network, not the CPU, so one process serves them all and pays
    for importing litellm once instead of once per role (see docs/cluster.md)."""

    def __init__(self, members: list[tuple[ActorRole, dict[str, Any]]]) -> None:
        self.members = [build(role, kwargs) for role, kwargs in members]

    @property
    def is_ready(self) -> bool:
        return all(getattr(m, "is_ready", True) for m in self.members)

    async def run(self, **kwargs: Any) -> list[Any]:
        import asyncio

        return list(await asyncio.gather(*(m.run(**kwargs) for m in self.members)))

    def stop(self) -> None:
        for m in self.members:
            m.stop()


class _Host:
    """Body of the Ray actor (kept importable without Ray for tests and local runs)."""

    def __init__(self, role: ActorRole, kwargs: dict[str, Any], log_level: str | None = None) -> None:
        from accelopt.logging import configure_logging

        configure_logging("json", log_level)
        self.role = role
        self.failed: Exception | None = None
        self.obj = build(role, kwargs)

    async def run(self, **kwargs: Any) -> Any:
        try:
            return await self.obj.run(**kwargs)
        except Exception as e:
            self.failed = e
            raise

    async def ready(self) -> bool:
        """Returns once the hosted object is connected and started (its `is_ready`); raises
        what stopped it if it failed before (e.g. a device agent that cannot be built)."""
        import asyncio

        while not getattr(self.obj, "is_ready", True):
            if self.failed is not None:
                raise self.failed
            await asyncio.sleep(0.05)
        return True

    def stop(self) -> bool:
        self.obj.stop()
        return True

    def ping(self) -> str:
        return self.role

    def summary(self) -> dict[str, Any]:
        """What the hosted object says it did (e.g. a curator's entries written), if it says."""
        report = getattr(self.obj, "summary", None)
        return report() if callable(report) else {}


def ray_host_class():
    import ray

    return ray.remote(max_restarts=5, max_task_retries=5)(_Host)


@dataclass
class Placement:
    """Ray resources an actor declares."""

    num_cpus: float = 0.0
    num_gpus: float = 0.0
    resources: dict[str, float] = field(default_factory=dict)

    def options(self) -> dict[str, Any]:
        opts: dict[str, Any] = {"num_cpus": self.num_cpus}
        if self.num_gpus:
            opts["num_gpus"] = self.num_gpus
        if self.resources:
            opts["resources"] = dict(self.resources)
        return opts


def device_placement(device: str) -> Placement:
    """What one profiler actor of a device kind holds while it lives: one slot of its family's
    Ray resource (`DeviceSlots.ray_resource`: "GPU", or a custom one such as `neuron_cores`)
    and a sliver of its generation's node label, or one CPU for a family without slots. On a
    cluster with none of the resource it holds `DeviceSlots.cpus_without` CPUs and its agent
    profiles without the device (the Triton interpreter, the NKI emulator)."""
    from hardware_agents.families import family_of

    family = family_of(device)
    slots = family.slots if family is not None else None
    if family is None or slots is None:
        return Placement(num_cpus=1)
    resources = _cluster_resources()
    if resources is not None and not resources.get(slots.ray_resource):
        return Placement(num_cpus=slots.cpus_without)
    label = _generation(family.kind(device).node_label, resources)
    if slots.ray_resource == "GPU":
        return Placement(num_gpus=1, resources=label)
    return Placement(resources={slots.ray_resource: 1, **label})


def _generation(node_label: str | None, resources: dict[str, float] | None) -> dict[str, float]:
    """A sliver of the node label of a kind's generation, when the cluster has one: a trn1
    profiler must not land on a trn2 node (its agent refuses to time there), nor an h100
    one on another GPU. Clusters without such labels place by device count alone."""
    if node_label and resources and resources.get(node_label):
        return {node_label: 0.001}
    return {}


def _cluster_resources() -> dict[str, float] | None:
    import ray

    return ray.cluster_resources() if ray.is_initialized() else None
