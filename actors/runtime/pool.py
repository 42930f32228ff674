"""Agents started once and shared by many runs: the demo's two runs, and a warm pool.

A run that starts its own agents pays for Ray, the actors' imports (litellm, lancedb,
torch) and the embedding model every time: seconds before its first profile. `AgentPool`
starts the log endpoint, Ray and one set of agents (LLM roles, profilers, the memory's
retriever and curator); agents serve every run on the stream, so a run then only needs its
coordinator. `accelopt up` keeps a pool alive and records it in `<root>/.pool.json`;
`accelopt run` on that root attaches to it (`attach_check`) and hosts its coordinator on a
thread of its own process, with no Ray at all.

A run attaches only where the pool's agents behave as its own would: its devices are among
the pool's, and the settings the agents were started with (memory URI and embedding model,
device options, profiling timeouts, sandbox, delivery) are the run's. The LLM settings need
not match: role workers take each run's model, limits and prices from its `RunStarted`
(`actors/roles/llm_roles.py`); API keys come from the pool's environment.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import msgspec

from accelopt.config import RunConfig
from events.runsource import process_alive

if TYPE_CHECKING:
    from actors.runtime.deployment import Deployment
    from events.runsource import LogEndpoint

POOL_FILE = ".pool.json"
# how often a long-lived pool's owner (`accelopt up`, a campaign's driver) starts again the
# agents whose actors died for good (`AgentPool.revive`)
REVIVE_EVERY_S = 10.0


class PoolInfo(msgspec.Struct, frozen=True):
    """What `<root>/.pool.json` records about a running pool."""

    nats_url: str
    pid: int
    devices: list[str]
    agents: dict[str, Any]  # `agent_settings` of the config the agents were started with
    started_at: float


def agent_settings(cfg: RunConfig) -> dict[str, Any]:
    """The parts of a config that shared agents were started with (not the run's own: its
    problems, search, seed and LLM settings travel in its RunStarted)."""
    from memory_index import default_uri, normalize_uri

    b = cfg.to_dict()
    return {
        "memory.uri": normalize_uri(cfg.memory.uri or default_uri(cfg.root)),
        "memory.embedding_model": cfg.memory.embedding_model,
        "devices": b["devices"],
        "profiling": b["profiling"],
        "sandbox": b["sandbox"],
        "workers": b["workers"],
    }


def pool_path(root: str | Path) -> Path:
    return Path(root) / POOL_FILE


def read_pool(root: str | Path) -> PoolInfo | None:
    """The pool running for `root`, if any (a record left by a dead pool is removed)."""
    path = pool_path(root)
    try:
        info = msgspec.json.decode(path.read_bytes(), type=PoolInfo)
    except (FileNotFoundError, msgspec.DecodeError):
        return None
    if not process_alive(info.pid):
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
        return None
    return info


def attach_check(cfg: RunConfig, devices: list[str]) -> tuple[PoolInfo | None, str | None]:
    """(the pool to attach to, None), (None, why it cannot serve this run), or (None, None)
    when no pool runs for the config's root."""
    pool = read_pool(cfg.root)
    if pool is None:
        return None, None
    missing = sorted(set(devices) - set(pool.devices))
    if missing:
        return None, f"it has no profiler for {', '.join(missing)} (it serves {', '.join(pool.devices)})"
    mine = agent_settings(cfg)
    if not cfg.memory.enabled:  # a run with the memory off does not care where the pool's is
        mine = {
            **mine,
            "memory.uri": pool.agents.get("memory.uri"),
            "memory.embedding_model": pool.agents.get("memory.embedding_model"),
        }
    differ = [k for k in mine if mine[k] != pool.agents.get(k)]
    if differ:
        return None, f"its agents were started with other settings: {', '.join(differ)}"
    return pool, None


class AgentPool:
    """The log endpoint, Ray and one set of agents for the devices of `devices`, as a context
    manager that yields the NATS URL (the agents are ready when it does)."""

    def __init__(
        self,
        cfg: RunConfig,
        devices: list[str],
        *,
        nats_url: str | None = None,
        ray_address: str | None = None,
        log_level: str | None = None,
    ) -> None:
        self.cfg, self.devices = cfg, devices
        self.nats_url, self.ray_address, self.log_level = nats_url, ray_address, log_level
        self.endpoint: LogEndpoint | None = None
        self.deployment: Deployment | None = None

    def __enter__(self) -> str:
        from actors.runtime.deployment import Deployment, init_ray
        from actors.runtime.session import create_stream, with_memory_uri
        from events.log import StreamSettings
        from events.runsource import open_log_endpoint

        cfg = with_memory_uri(self.cfg)
        self.endpoint = endpoint = open_log_endpoint(self.nats_url, cfg.root)
        try:
            settings = StreamSettings(
                replicas=cfg.log.replicas, duplicate_window_s=cfg.log.duplicate_window_s
            )
            asyncio.run(create_stream(endpoint.url, settings))
            init_ray(self.ray_address)
            self.deployment = deployment = Deployment(cfg, endpoint.url, log_level=self.log_level)
            deployment.start_workers(self.devices, memory=cfg.memory.enabled)
            deployment.wait_ready()
        except BaseException:
            self.__exit__()
            raise
        return endpoint.url

    def revive(self) -> list[str]:
        """Start again the agents whose actors died for good (`Deployment.revive`)."""
        return self.deployment.revive() if self.deployment is not None else []

    def deaths(self) -> list[str]:
        """The agents' deaths since the last call, one line each (`deaths.AgentDeath.line`)."""
        return [d.line() for d in self.deployment.deaths()] if self.deployment is not None else []

    def __exit__(self, *exc: object) -> None:
        if self.deployment is not None:
            self.deployment.stop()
            self.deployment = None
        if self.endpoint is not None:
            self.endpoint.close()
            self.endpoint = None


def record_pool(cfg: RunConfig, nats_url: str, devices: list[str]) -> Path:
    """Write `<root>/.pool.json` for this process's pool (atomically)."""
    path = pool_path(cfg.root)
    path.parent.mkdir(parents=True, exist_ok=True)
    info = PoolInfo(
        nats_url=nats_url,
        pid=os.getpid(),
        devices=sorted(devices),
        agents=agent_settings(cfg),
        started_at=time.time(),
    )
    tmp = path.with_suffix(".tmp")
    tmp.write_bytes(msgspec.json.encode(info))
    tmp.replace(path)
    return path


def forget_pool(root: str | Path) -> None:
    """Remove the pool record if it is this process's."""
    path = pool_path(root)
    with contextlib.suppress(FileNotFoundError, msgspec.DecodeError):
        if msgspec.json.decode(path.read_bytes(), type=PoolInfo).pid == os.getpid():
            path.unlink()
