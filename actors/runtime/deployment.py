"""Start and stop the set of actors a run needs on Ray.

`Deployment.start_workers()` places one host for the four LLM roles (planner, executor,
fixer, summarizer; or one host each with `workers.llm_roles_together: false`), one for the
memory (the curator that indexes entries and the retriever that answers retrievals), and
`workers` profiler hosts per device kind, then `start_coordinator` adds one coordinator
per run. Hosts consume their durable consumers until stopped, so one
deployment can serve several runs (and agents started elsewhere with `accelopt worker`
join the same consumers).
"""

from __future__ import annotations

import contextlib
import os
import secrets
import stat
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from accelopt import catalog as ev
from accelopt.config import RunConfig
from accelopt.logging import get_logger
from actors.base.worker import WorkerOptions
from actors.runtime.deaths import AgentDeath, DeathWatch, cause_phrase
from actors.runtime.hosting import ActorRole, Placement, device_placement, ray_host_class
from events.subjects import role_filter
from hardware_agents.families import profile_timeout_s

log = get_logger(component="deployment")


# A revived host that dies again is started again no sooner than 10 s x 2^(generation - 1)
# after its revival, at most an hour: an agent that can never start (a device whose toolchain
# went) is retried ever less often instead of every turn, and says so each time.
REVIVE_BACKOFF_S = (10.0, 3600.0)


class ActorStartError(RuntimeError):
    """An actor of the run failed while being built (an import error, a bad option)."""


def _root_cause(e: BaseException) -> str:
    """The last line of the innermost error (Ray wraps the actor's own exception)."""
    text = str(getattr(e, "cause", None) or e).strip().splitlines()
    return text[-1] if text else type(e).__name__


def ray_temp_dir() -> Path:
    """Where a local Ray keeps its sessions (sockets, logs, spilled objects): a 0700 folder of
    this user's (`$RAY_TMPDIR` if set), never the shared `/tmp/ray`, which Ray makes
    world-writable without the sticky bit: any process of another uid (a sandboxed kernel's)
    could delete a running campaign's raylet and plasma sockets there. Short, because Ray's
    socket paths must fit in 107 bytes."""
    path = Path(os.environ.get("RAY_TMPDIR") or Path(tempfile.gettempdir()) / f"accelopt-ray-{os.geteuid()}")
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    st = path.lstat()
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.geteuid():
        raise RuntimeError(f"{path} is not a folder of this user's: set RAY_TMPDIR to a private folder")
    if stat.S_IMODE(st.st_mode) != 0o700:
        os.chmod(path, 0o700)
    return path


def init_ray(address: str | None = None, *, num_cpus: int | None = None, object_store_mb: int = 200) -> None:
    """Connect to `address`, or start a local Ray that ends with this process (`reaper.py`:
    nothing of it survives a `kill -9` of this process by more than a second or two, and the
    next start removes what dead agents left under `/dev/shm`). Either way Ray's messages to
    the driver stay off stdout (`ray_messages.py`) and SIGTERM unwinds quietly (`signals.py`)."""
    import ray

    from actors.runtime import ray_messages
    from actors.runtime.reaper import start_reaper, sweep
    from actors.runtime.signals import unwind_on_sigterm

    if ray.is_initialized():
        return
    if address:
        ray.init(address=address, log_to_driver=False, configure_logging=False)
    else:
        sweep()  # what agents killed earlier left behind (their pids are gone)
        ray.init(
            num_cpus=num_cpus or max(2, os.cpu_count() or 2),
            include_dashboard=False,
            object_store_memory=object_store_mb * 1024 * 1024,
            log_to_driver=False,
            configure_logging=False,
            _temp_dir=str(ray_temp_dir()),
        )
        start_reaper()
    ray_messages.capture()
    unwind_on_sigterm()


def profiler_options(device: str, cfg: RunConfig) -> WorkerOptions:
    w = cfg.workers
    dcfg = cfg.devices.get(device)
    return WorkerOptions(
        durable=f"profiler-{device}",
        filter_subject=role_filter("ProfileRequested", device=device),
        concurrency=dcfg.concurrency if dcfg else 1,
        ack_wait_s=w.ack_wait_s,
        heartbeat_s=w.heartbeat_s,
        max_deliver=w.max_deliver,
    )


def llm_role_options(role: ev.Role, cfg: RunConfig) -> WorkerOptions:
    from actors.roles.llm_roles import role_options

    w = cfg.workers
    return role_options(
        role, cfg.llm, ack_wait_s=w.ack_wait_s, heartbeat_s=w.heartbeat_s, max_deliver=w.max_deliver
    )


@dataclass
class Hosted:
    name: str
    handle: Any
    run_ref: Any
    # how it was started (role, kwargs, placement, run kwargs): `revive` starts it so again
    spawn: tuple[ActorRole, dict[str, Any], Placement | None, dict[str, Any] | None] | None = None
    generation: int = 0  # how many times `revive` replaced it
    revive_after: float = 0.0  # (monotonic) `revive` leaves it alone until then: see REVIVE_BACKOFF_S


@dataclass
class Deployment:
    cfg: RunConfig
    nats_url: str
    log_level: str | None = None
    hosts: list[Hosted] = field(default_factory=list)
    tag: str = field(default_factory=lambda: secrets.token_hex(3))
    not_ready: set[str] = field(default_factory=set)  # hosts the last wait_ready gave up on
    watch: DeathWatch = field(default_factory=DeathWatch)  # the agents' deaths (deaths.py)
    unsaid: list[AgentDeath] = field(default_factory=list)  # deaths seen, not yet taken by `deaths()`

    def _spawn(
        self,
        name: str,
        role: ActorRole,
        kwargs: dict[str, Any],
        placement: Placement | None = None,
        run_kwargs: dict[str, Any] | None = None,
    ) -> Hosted:
        hosted = self._start(name, role, kwargs, placement, run_kwargs, 0)
        self.hosts.append(hosted)
        return hosted

    def _start(
        self,
        name: str,
        role: ActorRole,
        kwargs: dict[str, Any],
        placement: Placement | None,
        run_kwargs: dict[str, Any] | None,
        generation: int,
    ) -> Hosted:
        host_cls = ray_host_class()
        opts = (placement or Placement()).options()
        # named "accelopt-<name>-<deployment tag>" (a revived one "-r<generation>" after it), so
        # operators (and tests) can find an actor
        actor_name = f"accelopt-{name}-{self.tag}" + (f"-r{generation}" if generation else "")
        handle = host_cls.options(name=actor_name, **opts).remote(role, kwargs, self.log_level)
        return Hosted(
            name,
            handle,
            handle.run.remote(**(run_kwargs or {})),
            (role, kwargs, placement, run_kwargs),
            generation,
        )

    def revive(self) -> list[str]:
        """Start again every host whose `run()` ended while the deployment serves: Ray restarts
        a killed actor only `max_restarts` times (an OOM-killing machine spends them in
        minutes), and a worker whose loop failed stays alive doing nothing; either way its
        device would wait forever. Returns "name: why" per host replaced (none: [])."""
        import ray

        if not self.hosts:
            return []
        self._watch()  # a death Ray recorded is read before its host is replaced
        refs = [h.run_ref for h in self.hosts]
        done, _ = ray.wait(refs, num_returns=len(refs), timeout=0)
        now = time.monotonic()
        said: list[str] = []
        for i, h in enumerate(self.hosts):
            if h.run_ref not in done or h.spawn is None or now < h.revive_after:
                continue
            try:
                ray.get(h.run_ref, timeout=0)
                why = "its loop returned"
            except Exception as e:  # RayActorError: died for good; else what its loop raised
                why = cause_phrase(str(getattr(e, "cause", None) or e)) or _root_cause(e)
            with contextlib.suppress(Exception):
                ray.kill(h.handle, no_restart=True)
            # counted first: a start that fails below is tried again under a name not yet taken
            h.generation += 1
            self.not_ready.discard(h.name)  # stopped gracefully, as the others are
            new = self._start(h.name, *h.spawn, h.generation)
            first, most = REVIVE_BACKOFF_S
            new.revive_after = now + min(most, first * 2 ** (h.generation - 1))
            self.hosts[i] = new
            said.append(f"{h.name}: {why}")
        if said:
            log.warning("actors revived", actors=said)
        return said

    def _watch(self) -> None:
        with contextlib.suppress(Exception):  # a Ray going down cannot be asked: nothing to say
            self.unsaid.extend(self.watch.check(self.hosts))

    def deaths(self) -> list[AgentDeath]:
        """The agents' deaths since the last call, each once (`deaths.DeathWatch`)."""
        self._watch()
        out, self.unsaid = self.unsaid, []
        return out

    def start_workers(self, devices: list[str], *, memory: bool | None = None) -> None:
        """LLM roles, profilers for `devices`, and the memory (curator and retriever; by
        default when the config enables it: `memory=True` when another config in force
        during the run may, e.g. an ablation's parent's before the fork)."""
        roles = {
            role: {
                "nats_url": self.nats_url,
                "llm_config": self.cfg.llm,
                "options": llm_role_options(role, self.cfg),
            }
            for role in ev.LLM_ROLES
        }
        if self.cfg.workers.llm_roles_together:
            self._spawn("llm", "group", {"members": list(roles.items())})
        else:
            for role, kwargs in roles.items():
                self._spawn(role, role, kwargs)
        for device in devices:
            dcfg = self.cfg.devices.get(device)
            for i in range(dcfg.workers if dcfg else 1):
                self._spawn(
                    f"profiler-{device}-{i}",
                    "profiler",
                    {
                        "nats_url": self.nats_url,
                        "device": device,
                        "timeout_s": profile_timeout_s(device, self.cfg.profiling),
                        "worker_name": f"{device}-{i}",
                        "options": profiler_options(device, self.cfg),
                        "agent_options": dict(dcfg.options) if dcfg else {},
                    },
                    device_placement(device),
                )
        if self.cfg.memory.enabled if memory is None else memory:
            # one process keeps the memory: it indexes entries and answers retrievals
            kw = {
                "nats_url": self.nats_url,
                "uri": self.cfg.memory.uri,
                "embedder": self.cfg.memory.embedding_model,
                "storage_options": dict(self.cfg.memory.storage_options) or None,
            }
            self._spawn(
                "memory",
                "group",
                {"members": [("curator", kw), ("retriever", kw)]},
            )

    def wait_ready(self, timeout_s: float = 300.0, report: Callable[[str], None] | None = None) -> list[str]:
        """Block until every started host has connected and loaded what it needs, so the
        run's first profiles are not timed while actors are still importing and loading.
        Returns the hosts still not ready after `timeout_s` (said through `report`, else
        logged)."""
        import ray

        refs = [h.handle.ready.remote() for h in self.hosts]
        done, pending = ray.wait(refs, num_returns=len(refs), timeout=timeout_s)
        for h, r in zip(self.hosts, refs, strict=True):
            if r in done:
                try:
                    ray.get(r)
                except Exception as e:  # it could not even be built: the run would wait on it forever
                    raise ActorStartError(f"the {h.name} actor could not start: {_root_cause(e)}") from e
        slow = [h.name for h, r in zip(self.hosts, refs, strict=True) if r in pending]
        self.not_ready = set(slow)
        if slow:
            text = f"actors not ready after {timeout_s:.0f} s: {', '.join(slow)}"
            if report is not None:
                report(text)
            else:
                log.warning(text)
        return slow

    def start_coordinator(self, run_id: str) -> Hosted:
        return self._spawn(
            f"coordinator-{run_id}", "coordinator", {"nats_url": self.nats_url, "run_id": run_id}
        )

    def stop(self, timeout_s: float = 15.0) -> None:
        import ray

        stops = []
        # a host that never became ready (e.g. still waiting for a node with its device) is
        # not waited for: it is only killed
        started = [h for h in self.hosts if h.name not in self.not_ready]
        for h in started:
            with contextlib.suppress(Exception):
                # not retried: an actor killed below must not be restarted to stop again (Ray
                # would print a retry warning for every one)
                stops.append(h.handle.stop.options(max_task_retries=0).remote())
        refs = [h.run_ref for h in started] + stops
        with contextlib.suppress(Exception):
            ray.wait(refs, num_returns=len(refs), timeout=timeout_s)
        for h in self.hosts:
            with contextlib.suppress(Exception):
                ray.kill(h.handle, no_restart=True)
        self.hosts.clear()
