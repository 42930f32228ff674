"""One `accelopt run` from start to finish, on embedded defaults or a cluster.

1. the event log: the given NATS URL, or the root's embedded JetStream server (started if
   none is running for this root; its data lives under `<root>/.nats`);
2. Ray: `--ray-address`, or a local Ray;
3. the actors (agents, profilers, curator) and the run's coordinator;
4. `RunStarted` with the full config, seed, problems, price snapshot and toolchain;
5. follow the run's events (progress callback) until it completes, fails or times out;
6. the run directory: the exported log, the best kernels as files, results.json.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import platform
import secrets
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Literal

import msgspec
import nats.js.errors

import accelopt
from accelopt import catalog as ev
from accelopt.config import RunConfig, recorded_config, target_devices
from accelopt.logging import get_logger
from accelopt.problem import Problem
from events.codec import decode
from events.log import EventLog, StreamSettings
from events.runsource import open_log_endpoint
from events.subjects import role_filter, run_filter
from hardware_agents.languages import find_language
from replay.fold import RunView
from replay.runstate import RunLock
from replay.states import time_up

if TYPE_CHECKING:
    from actors.runtime.coordinator_handle import CoordinatorHandle
    from actors.runtime.deployment import Deployment

log = get_logger(component="session")


DEATHS_EVERY_S = 2.0  # how often a run that hosts its own agents asks whether one died


class RunError(RuntimeError):
    pass


class RunTimedOut(RunError):
    """The run's `timeout_s` passed before it could start (its agents were not ready)."""


def new_run_id() -> str:
    return time.strftime("%Y%m%d-%H%M%S", time.gmtime()) + "-" + secrets.token_hex(2)


def with_memory_uri(cfg: RunConfig) -> RunConfig:
    """Record the memory URI the run uses (default: `$ACCELOPT_MEMORY` or `<root>/memory`)."""
    from memory_index import default_uri, normalize_uri

    uri = normalize_uri(cfg.memory.uri or default_uri(cfg.root))  # its token routes retrievals
    return msgspec.structs.replace(cfg, memory=msgspec.structs.replace(cfg.memory, uri=uri))


# --- RunStarted -----------------------------------------------------------------------------


def toolchain(devices: list[str]) -> dict[str, str]:
    import importlib.metadata as md

    out = {
        "accelopt": accelopt.__version__,
        "python": platform.python_version(),
        "platform": platform.platform(),
    }
    for pkg in ("ray", "nats-py", "litellm", "lancedb", "torch", "triton", "msgspec"):
        with contextlib.suppress(md.PackageNotFoundError):
            out[pkg] = md.version(pkg)
    from hardware_agents.families import get_agent

    for d in devices:
        with contextlib.suppress(Exception):
            agent = get_agent(d)
            out.update({f"{d}.{k}": v for k, v in agent.toolchain().items()})
    return out


def price_snapshot(cfg: RunConfig) -> dict:
    """Prices of every configured model; fails closed on an unpriced one (see the gateway)."""
    from actors.llm.pricing import price_snapshot as snapshot

    return snapshot(cfg.llm)


def run_started(
    run_id: str,
    cfg: RunConfig,
    problems: list[Problem],
    *,
    prices: dict,
    tools: dict[str, str],
    parent_run: str | None = None,
    fork_iteration: int | None = None,
    origins: Mapping[str, str] | None = None,
) -> ev.RunStarted:
    devices = target_devices(cfg, [p.name for p in problems])
    targets = [
        ev.ProblemTarget(
            problem=p,
            device=devices[p.name],
            language=p.baseline.spec.language,
            content_hash=p.content_hash(),
            origin_source=(origins or {}).get(p.name, ""),
        )
        for p in problems
    ]
    return ev.RunStarted(
        **ev.envelope(ev.RunStarted, run_id, ts=time.time()),
        config=cfg.to_dict(),
        seed=cfg.seed,
        targets=targets,
        prices=prices,
        toolchain=tools,
        parent_run=parent_run,
        fork_iteration=fork_iteration,
        kernel_ids="content",
    )


# --- following a run --------------------------------------------------------------------------


@dataclass
class RunOutcome:
    run_id: str
    view: RunView
    run_dir: Path
    warnings: list[str] = field(default_factory=list)
    timed_out: bool = False


class StallWatch:
    """Says when work waits on a role nobody serves (e.g. a device kind with no profiler
    worker connected): the run has open requests for a role, and its durable consumer
    either does not exist (no worker ever joined) or has pending messages with none being
    worked on and no instance fetching. Checked while the run is idle; reported once."""

    def __init__(
        self,
        devices: str | list[str],
        *,
        after_s: float = 20.0,
        report: Callable[[str], None] | None = None,
        fail_after_s: float | None = None,
    ) -> None:
        self.devices = [devices] if isinstance(devices, str) else list(devices)
        self.after_s = after_s
        # a role still unserved after this long ends the run (`workers.unserved_fail_after_s`)
        self.fail_after_s = fail_after_s
        self.given_up: str | None = None  # the work queue the run gave up on
        self.report = report or (lambda text: log.warning(text))
        self.open: dict[str, dict[str, str]] = {}  # durable -> request id -> type
        self._since: dict[str, float] = {}
        self._reported: set[str] = set()
        self._next = 0.0

    def observe(self, e: ev.Event) -> None:
        if isinstance(e, ev.ProfileRequested):
            self.open.setdefault(f"profiler-{e.device}", {})[e.event_id] = e.type
        elif type(e) in ev.ROLE_OF_REQUEST:
            self.open.setdefault(ev.ROLE_OF_REQUEST[type(e)], {})[e.event_id] = e.type
        rid = getattr(e, "request_id", None)
        if rid and not isinstance(e, ev.LLMCallCompleted):
            for reqs in self.open.values():
                reqs.pop(rid, None)

    async def check(self, elog: EventLog) -> None:
        now = time.monotonic()
        if now < self._next:
            return
        self._next = now + 2.0
        for durable, reqs in self.open.items():
            starved = False
            if reqs:
                try:
                    info = await elog.js.consumer_info(elog.settings.name, durable)
                    starved = info.num_pending > 0 and info.num_ack_pending == 0 and info.num_waiting == 0
                except nats.js.errors.NotFoundError:
                    starved = True  # no worker of this role ever joined
                except Exception:
                    starved = False
            if not starved:
                self._since.pop(durable, None)
                self._reported.discard(durable)
                continue
            first = self._since.setdefault(durable, now)
            if self.fail_after_s is not None and now - first >= self.fail_after_s and self.given_up is None:
                self.given_up = durable
            if now - first >= self.after_s and durable not in self._reported:
                self._reported.add(durable)
                if durable.startswith("profiler-"):
                    start = f"accelopt worker --nats URL --device {durable.removeprefix('profiler-')}"
                else:
                    start = f"accelopt worker --nats URL --roles {durable}"
                then = (
                    f"the run fails after {self.fail_after_s:g} s of this"
                    if self.fail_after_s is not None
                    else "the run waits"
                )
                self.report(
                    f"{len(reqs)} request(s) wait on '{durable}' and no worker serves it "
                    f"(start one, e.g. `{start}`); {then}"
                )


class InFlight:
    """The run's requests (LLM calls, profiles) that have no recorded result yet."""

    def __init__(self) -> None:
        self.open: set[str] = set()

    def observe(self, e: ev.Event) -> None:
        if isinstance(e, (*ev.ROLE_OF_REQUEST, ev.ProfileRequested)):
            self.open.add(e.event_id)
        elif isinstance(e, (ev.LLMCallCompleted, ev.KernelProfiled)):
            self.open.discard(e.request_id)


def unserved_failure(run_id: str, watch: StallWatch) -> ev.RunFailed:
    """The RunFailed of a run whose requests waited on a work queue nobody served for
    `watch.fail_after_s` (reason `unserved: <queue>`, e.g. `unserved: profiler-h100`)."""
    durable = watch.given_up or ""
    return ev.RunFailed(
        **ev.envelope(ev.RunFailed, run_id, "unserved", durable, ts=time.time()),
        reason=f"unserved: {durable}",
        detail=f"requests waited {watch.fail_after_s:g} s on '{durable}' and no worker served them "
        "(workers.unserved_fail_after_s)",
    )


async def follow_run(
    url: str,
    run_id: str,
    *,
    on_event: Callable[[ev.Event, RunView], None] | None = None,
    timeout_s: float | None = None,
    alive: Callable[[], str | None] | None = None,
    stall_watch: StallWatch | None = None,
    settle_s: float = 5.0,
) -> tuple[RunView, bool]:
    """Fold the run's events as they arrive until RunCompleted/RunFailed (or timeout).

    A run that fails or stops on budget can end with LLM calls or profiles in flight: their
    results (cost, errors) are awaited up to `settle_s` more, so the log exported next and the
    summary printed from this view hold them.

    `alive()` is polled while idle; a non-None return (why the coordinator is gone) ends the
    wait with a RunFailed published on the run's behalf. `stall_watch` reports roles that
    have work but no worker.
    """
    view = RunView(run_id, compact=True)  # flat over a run of any length
    deadline = time.monotonic() + timeout_s if timeout_s else None
    answers = InFlight()
    ended_at: float | None = None
    gave_up = False
    elog = await EventLog.connect(url, name=f"accelopt-follow-{run_id}")
    try:
        async for _seq, event, _pending in elog.follow(run_filter(run_id), idle_timeout=0.5):
            if ended_at is not None:  # the run has ended: only its calls still in flight are awaited
                if event is not None:
                    view.apply(event)
                    answers.observe(event)
                if not answers.open or time.monotonic() - ended_at > settle_s:
                    return view, False
                continue
            if event is None and stall_watch is not None:
                await stall_watch.check(elog)
                if stall_watch.given_up is not None and not gave_up:  # reported, not waited on forever
                    gave_up = True
                    await elog.publish(unserved_failure(run_id, stall_watch))
            if event is not None:
                view.apply(event)
                answers.observe(event)
                if stall_watch is not None:
                    stall_watch.observe(event)
                if on_event:
                    on_event(event, view)
                if isinstance(event, (ev.RunCompleted, ev.RunFailed)):
                    if not answers.open:
                        return view, False
                    ended_at = time.monotonic()
            elif alive is not None:
                why = alive()
                if why:
                    failed = ev.RunFailed(
                        **ev.envelope(ev.RunFailed, run_id, "coordinator", ts=time.time()),
                        reason="coordinator stopped",
                        detail=why,
                    )
                    await elog.publish(failed)
            if deadline and time.monotonic() > deadline:
                return view, True
    finally:
        await elog.close()
    return view, False


# --- run directory ---------------------------------------------------------------------------


def best_extension(language: str) -> str:
    """The extension of `best/<problem>.*` for a kernel in `language` (`.txt` if unregistered)."""
    lang = find_language(language)
    return lang.extension if lang else ".txt"


def write_run_dir(run_dir: Path, view: RunView, cfg: RunConfig) -> None:
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / "config.json").write_text(json.dumps(cfg.to_dict(), indent=2) + "\n")
    best_dir = run_dir / "best"
    best_dir.mkdir(exist_ok=True)
    for r in view.results():
        k = view.kernels.get(r.best_kernel_id or "")
        if k is not None:
            (best_dir / f"{r.problem}{best_extension(k.language)}").write_text(k.source)
    results = {
        "run_id": view.run_id,
        "status": view.status,
        "cost_usd": view.cost_usd,
        "problems": [dataclasses.asdict(r) for r in view.results()],
        "usage": {role: dataclasses.asdict(u) for role, u in view.usage.items()},
    }
    (run_dir / "results.json").write_text(json.dumps(results, indent=2) + "\n")


async def wait_indexed(
    url: str, run_id: str, entry_ids: set[str], *, timeout_s: float, poll_s: float = 0.2
) -> int:
    """Wait until the curator has said `MemoryIndexed` for each of the run's entries (the last
    insight lands after the run's last decision); returns how many are still not. Reads only
    the run's `memory.indexed` subject, and each message once."""
    if not entry_ids:
        return 0
    elog = await EventLog.connect(url, create=False, name="accelopt-session")
    try:
        deadline = time.monotonic() + timeout_s
        indexed: set[str] = set()
        next_seq = 1
        while True:
            async for msg in elog.iter_raw(role_filter("MemoryIndexed", run_id), from_seq=next_seq):
                seq = msg.metadata.sequence.stream
                next_seq = seq + 1
                e = decode(msg.data, msg.subject, seq)
                if isinstance(e, ev.MemoryIndexed):
                    indexed.add(e.entry_id)
            missing = len(entry_ids - indexed)
            if not missing or time.monotonic() >= deadline:
                return missing
            await asyncio.sleep(poll_s)
    finally:
        await elog.close()


async def export_log(url: str, run_id: str, path: Path) -> int:
    elog = await EventLog.connect(url)
    try:
        return await elog.export_run(run_id, str(path))
    finally:
        await elog.close()


async def create_stream(url: str, settings: StreamSettings) -> None:
    """Create the stream with `settings` if it does not exist yet."""
    elog = await EventLog.connect(url, settings=settings)
    await elog.close()


async def publish(url: str, event: ev.Event, settings: StreamSettings | None = None) -> None:
    """Publish one event (creating the stream with `settings` if it does not exist yet)."""
    elog = await EventLog.connect(url, settings=settings)
    try:
        await elog.publish(event)
    finally:
        await elog.close()


@dataclass(frozen=True)
class SessionOptions:
    """How `run_session` runs a run, besides its config and problems (all optional).

    Where: `nats_url` (default: the root's embedded server), `ray_address` (default: a local
    Ray), `coordinator` ("ray": an actor; "local": a thread of this process, for a run whose
    agents are already up, e.g. a warm pool's: such a run needs no Ray at all),
    `start_workers` (False: agents started elsewhere serve it), `log_level` of the actors.
    Which run: `run_id` (default: a new one, or `started_event`'s); `started_event`: publish
    this RunStarted (an ablation's) instead of building one; `resume`: the run exists on the
    log (`started_event`: its recorded RunStarted): start its actors and coordinator again,
    which re-derives its state from the log and goes on from there; `devices`: the run's
    device kinds when resuming (its RunStarted's targets; default: derived from the config).
    Following it: `on_event(event, view)` per event, `on_warning(text)` per warning (default:
    logged), `timeout_s` bounding the whole call, the start of Ray and of the agents
    included: when it passes before the agents are ready, nothing is published and
    `RunTimedOut` says which ones were not; later, the outcome is `timed_out` and the run
    is left `stopped` (replay/states.py): a run of its own stays resumable. `campaign`: the
    campaign the run belongs to (its lock names the campaign's resume command, and a run its
    deadline ends is the campaign's to go on with or not). `origins`: per problem, the entry
    source of its suite's own baseline where the run starts from another kernel (a campaign's
    run): recorded in its target, timed in its end-of-problem re-measure beside baseline and best.
    """

    nats_url: str | None = None
    ray_address: str | None = None
    coordinator: Literal["ray", "local"] = "ray"
    start_workers: bool = True
    log_level: str | None = None
    run_id: str | None = None
    started_event: ev.RunStarted | None = None
    resume: bool = False
    devices: list[str] | None = None
    on_event: Callable[[ev.Event, RunView], None] | None = None
    on_warning: Callable[[str], None] | None = None
    timeout_s: float | None = None
    campaign: str = ""
    origins: Mapping[str, str] = field(default_factory=dict)


def run_session(cfg: RunConfig, problems: list[Problem], options: SessionOptions | None = None) -> RunOutcome:
    """Run `problems` under `cfg` to completion (see the module docstring and `SessionOptions`).

    Each problem is optimized on its own device kind (`target_devices`: the `@DEVICE` of its
    reference in `cfg.problems`, else `cfg.device`); profilers start for every kind of the run.
    """
    o = options or SessionOptions()
    if o.coordinator == "local" and o.start_workers:
        raise ValueError(
            "a coordinator in this process serves agents started elsewhere (start_workers=False)"
        )
    deadline = time.monotonic() + o.timeout_s if o.timeout_s else None
    _refuse_unsafe(cfg, problems, o.devices, o.start_workers)
    cfg = with_memory_uri(cfg)
    run_id = o.run_id or (o.started_event.run_id if o.started_event else new_run_id())
    run_dir = Path(cfg.root) / run_id
    # held while this process drives the run: a killed driver leaves the run `interrupted`
    # (replay/runstate.py), and a second driver of the same run is refused (RunBusy)
    lock = RunLock.of_run(cfg.root, run_id, campaign=o.campaign).__enter__()
    published = o.resume
    try:
        endpoint = open_log_endpoint(o.nats_url, cfg.root)
    except BaseException:
        _drop_lock(lock, run_dir, published)
        raise
    actors = _RunActors(o.coordinator, endpoint.url, run_id)
    timed_out = False
    try:
        start, devices = _run_start(cfg, problems, run_id, o.devices, o.started_event, o.resume, o.origins)
        settings = StreamSettings(replicas=cfg.log.replicas, duplicate_window_s=cfg.log.duplicate_window_s)
        # the run's settings (replicas) make the stream, not the first actor to connect with the defaults
        asyncio.run(create_stream(endpoint.url, settings))
        memory_on = needs_memory(cfg, o.started_event if o.resume else start)
        actors.start(cfg, o, devices, memory_on, deadline, new_run=start is not None)
        if start is not None:
            asyncio.run(publish(endpoint.url, start, settings))
            published = True
        outcome = _follow_and_write(
            cfg, o, endpoint.url, run_id, run_dir, actors, devices, memory_on, deadline
        )
        timed_out = outcome.timed_out
        return outcome
    finally:
        actors.stop()
        endpoint.close()
        _drop_lock(lock, run_dir, published, timed_out=timed_out)


class _RunActors:
    """The run's coordinator and, where the run starts its own, its agents on Ray."""

    def __init__(self, coordinator: str, url: str, run_id: str) -> None:
        self.coordinator = coordinator
        self.url = url
        self.run_id = run_id
        self.deployment: Deployment | None = None
        self.coord: CoordinatorHandle | None = None
        self._deaths_at = 0.0  # (monotonic) when `alive` next asks about the agents' deaths

    def start(
        self,
        cfg: RunConfig,
        o: SessionOptions,
        devices: list[str],
        memory_on: bool,
        deadline: float | None,
        *,
        new_run: bool,
    ) -> None:
        """Ray and the agents (when this run starts them), and the coordinator: a new run's
        starts with the agents (it waits for RunStarted), a resumed one's only once they are
        ready, as it acts at once."""
        from actors.runtime.coordinator_handle import start_coordinator
        from actors.runtime.deployment import Deployment, init_ray

        if self.coordinator == "ray":
            init_ray(o.ray_address)
            self.deployment = Deployment(cfg, self.url, log_level=o.log_level)
        if new_run:
            self.coord = start_coordinator(self.coordinator, self.url, self.run_id, self.deployment)
        if o.start_workers and self.deployment is not None:
            self._start_agents(self.deployment, o, devices, memory_on, deadline)
        if self.coord is None:
            self.coord = start_coordinator(self.coordinator, self.url, self.run_id, self.deployment)

    @staticmethod
    def _start_agents(
        deployment: Deployment, o: SessionOptions, devices: list[str], memory_on: bool, deadline: float | None
    ) -> None:
        """Start the run's agents and wait until they are ready: RunError if one cannot start,
        RunTimedOut if the run's time is up first, a warning if they are slow."""
        from actors.runtime.deployment import ActorStartError

        deployment.start_workers(devices, memory=memory_on)
        wait_s = 300.0 if deadline is None else min(300.0, max(0.0, deadline - time.monotonic()))
        try:
            slow = deployment.wait_ready(wait_s, report=lambda _text: None)  # said here
        except ActorStartError as e:  # nothing would answer its requests: stop, say why
            raise RunError(str(e)) from e
        if slow and deadline is not None and time.monotonic() >= deadline:
            raise RunTimedOut(
                f"timed out after {o.timeout_s:g} s waiting for the run's agents to start "
                f"({', '.join(slow)} not ready); the run did not start"
            )
        if slow:
            (o.on_warning or log.warning)(
                f"actors not ready after {wait_s:.0f} s: {', '.join(slow)}; the run goes on and waits for them"
            )

    def alive(self, say: Callable[[str], None]) -> str | None:
        """Why the coordinator is gone (None while it runs); first, each agent death of the
        run's own agents since the last look, said in its one line (`deaths.py`), at most
        every `DEATHS_EVERY_S`."""
        now = time.monotonic()
        if self.deployment is not None and now >= self._deaths_at:
            self._deaths_at = now + DEATHS_EVERY_S
            for d in self.deployment.deaths():
                say(d.line())
        assert self.coord is not None
        return self.coord.problem()

    def stop(self) -> None:
        if self.coord is not None:
            self.coord.stop()
        if self.deployment is not None:
            self.deployment.stop()


def _follow_and_write(
    cfg: RunConfig,
    o: SessionOptions,
    url: str,
    run_id: str,
    run_dir: Path,
    actors: _RunActors,
    devices: list[str],
    memory_on: bool,
    deadline: float | None,
) -> RunOutcome:
    """Follow the published run to its end, wait for its insights to be in the memory, export
    its log and write its directory."""
    assert actors.coord is not None
    watch = StallWatch(
        devices,
        after_s=cfg.workers.unserved_warn_after_s,
        report=o.on_warning,
        fail_after_s=cfg.workers.unserved_fail_after_s,
    )
    left_s = None if deadline is None else max(0.001, deadline - time.monotonic())
    view, timed_out = asyncio.run(
        follow_run(
            url,
            run_id,
            on_event=o.on_event,
            timeout_s=left_s,
            alive=lambda: actors.alive(o.on_warning or log.warning),
            stall_watch=watch,
        )
    )
    warnings = actors.coord.warnings()
    # the run is done once its insights are in the memory (whoever hosts the curator: this
    # run, a pool or the demo's shared agents)
    if memory_on and not timed_out:
        warnings += _memory_warnings(url, run_id, view, cfg)
    run_dir.mkdir(parents=True, exist_ok=True)
    asyncio.run(export_log(url, run_id, run_dir / "log.aolog"))
    write_run_dir(run_dir, view, cfg)
    return RunOutcome(run_id, view, run_dir, warnings, timed_out)


def _drop_lock(lock: RunLock, run_dir: Path, published: bool, *, timed_out: bool = False) -> None:
    """Release the run's lock (a run its time ran out on is left `stopped`, and its lock says
    so: replay/states.py); a run that never started (no RunStarted published) leaves no
    directory behind."""
    if timed_out:
        state = time_up(lock.info.campaign)
        lock.release(ended=state.name, why=state.detail)
    lock.release()
    if not published:
        lock.path.unlink(missing_ok=True)
        with contextlib.suppress(OSError):
            run_dir.rmdir()


def _run_start(
    cfg: RunConfig,
    problems: list[Problem],
    run_id: str,
    devices: list[str] | None,
    started_event: ev.RunStarted | None,
    resume: bool,
    origins: Mapping[str, str] | None = None,
) -> tuple[ev.RunStarted | None, list[str]]:
    """The RunStarted to publish (None when resuming: the run is on the log) and the run's
    device kinds (an ablation's are its parent's)."""
    if devices is None:
        devices = sorted(set(target_devices(cfg, [p.name for p in problems]).values()))
    if resume:
        return None, devices
    start = started_event or run_started(
        run_id, cfg, problems, prices=price_snapshot(cfg), tools=toolchain(devices), origins=origins
    )
    return start, sorted({t.device for t in start.targets})


def needs_memory(cfg: RunConfig, started: ev.RunStarted | None) -> bool:
    """Whether the run needs the memory workers: its config enables the memory, or it is an
    ablation that repeats its parent's settings before the fork and those do. Unknown (a
    resumed run whose RunStarted was not given): start them."""
    if cfg.memory.enabled:
        return True
    if started is None:
        return True
    return (
        started.fork_config is not None
        and recorded_config(started.fork_config, source="RunStarted.fork_config").memory.enabled
    )


def _memory_warnings(url: str, run_id: str, view: RunView, cfg: RunConfig) -> list[str]:
    """Wait (up to memory.index_wait_s) for the run's insights to be in the memory; a warning if not."""
    added = set(view.memory_entry_ids)
    missing = asyncio.run(wait_indexed(url, run_id, added, timeout_s=cfg.memory.index_wait_s))
    if not missing:
        return []
    return [
        f"memory: {missing} of this run's entries not indexed after "
        f"{cfg.memory.index_wait_s:.0f}s (is the memory curator running?)"
    ]


def _refuse_unsafe(
    cfg: RunConfig, problems: list[Problem], devices: list[str] | None, start_workers: bool
) -> None:
    """Refuse a run before anything starts: no problems, a device family that refuses it (a
    simulated device selected by accident), or kernels to run on a machine that cannot
    isolate them."""
    if not problems:
        raise RunError("no problems to optimize")
    from hardware_agents.families import run_refusal

    options = {kind: d.options for kind, d in cfg.devices.items()}
    why = run_refusal(devices or target_devices(cfg, [p.name for p in problems]).values(), options)
    if why:  # e.g. a simulated device must never be selected by accident
        raise RunError(why)
    if start_workers:  # this machine will run LLM-written kernels: refuse now, not kernel by kernel
        refuse_unisolated(cfg)


def refuse_unisolated(cfg: RunConfig) -> None:
    """RunError if this machine cannot isolate the kernels its profilers would run."""
    from hardware_agents.sandbox import allow_unisolated, isolation_problem

    with allow_unisolated(cfg.sandbox.allow_unisolated):
        problem = isolation_problem()
    if problem:
        raise RunError(problem)
