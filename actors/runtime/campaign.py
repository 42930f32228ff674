"""A campaign from start to stop, and again after a crash: `accelopt campaign run` / `resume`.

The driver is the scheduler core's shell (`accelopt/campaign_core.py`), as the coordinator's
shell is the run's: it folds the campaign's log into the core, publishes what the core
decides, and carries the decisions out. One set of agents (`AgentPool`: LLM roles,
profilers per device kind, the memory) serves every run of the campaign; each scheduled run
is an ordinary run, driven by `run_session` on a thread of this process with its coordinator
beside it (several at once where the devices have the slots; `actors/runtime/campaign_run.py`
carries the runs out). When a run ends, what it came to is read from its own log and published
as the campaign's `CampaignRunFinished`, the core's next input.

Nothing is lost to a crash (`kill -9` included): the campaign's events and its runs' are on
the log. `resume` re-derives the core's state and decisions from the campaign's log
(publishing only what the log lacks), then for each run scheduled and not finished: a run
that ended while the driver was down is only read; a run that started is resumed
(`run_session` with `SessionOptions(resume=True)`: its coordinator re-derives its state,
nothing it finished is done again); a run that never started is started with the id it was given. The campaign's
exported log, lock and summary live in `<root>/campaigns/<id>/`; its runs in `<root>/<run_id>/`.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import queue
import re
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from accelopt import catalog as ev
from accelopt.campaign import (
    CampaignSpec,
    agent_config,
    check_configs,
    problem_specs,
    run_config,
    run_memory,
    with_start_kernel,
)
from accelopt.campaign_core import CampaignCore
from accelopt.config import ConfigError, RunConfig, build_config
from accelopt.folders import private_folder
from accelopt.logging import get_logger
from accelopt.problem import Problem
from actors.runtime.campaign_run import CampaignRuns, RunEnd, Setup, run_state
from actors.runtime.pool import REVIVE_EVERY_S
from events.log import EventLog, StreamSettings
from events.runsource import LOG_NAME, open_log_endpoint
from replay.campaign import CampaignView, campaign_dir, figure_text, unknown_campaign
from replay.runstate import RunLock
from replay.states import DRIVEN, State, campaign_run_state, campaign_state, record_campaign_run

if TYPE_CHECKING:
    from actors.runtime.pool import AgentPool

log = get_logger(component="campaign")

_E = TypeVar("_E", bound=ev.Event)

PROMPT_TOKENS_BOUND = 32_768  # a call's input, for the bound on its cost before any call was seen
SUMMARY_NAME = "campaign.json"


class CampaignError(RuntimeError):
    pass


def new_campaign_id(name: str) -> str:
    safe = re.sub(r"[^A-Za-z0-9_-]+", "-", name).strip("-")[:40] or "campaign"
    return f"{safe}-{time.strftime('%Y%m%d-%H%M%S', time.gmtime())}-{secrets.token_hex(2)}"


# --- the campaign's problems -------------------------------------------------------------------


def resolve_items(
    spec: CampaignSpec, *, on_warning: Callable[[str], None] | None = None
) -> list[tuple[ev.CampaignItem, Problem]]:
    """Every (problem, device kind) the campaign file names, loaded and checked as a run's
    problems are (suites exist, each device has an agent that runs the problem's language)."""
    import suites
    from suites.selection import load_problems

    refs: list[tuple[str, str, str, str]] = []  # (suite as named, the suite's own name, problem, device)
    for p in problem_specs(spec):
        try:
            info = suites.suite_info(p.suite)
            names = [p.name] if p.name else suites.problem_names(p.suite)
        except KeyError as e:
            raise ConfigError(f"problems: {e.args[0]}") from None
        refs += [(p.suite, info.name, n, p.device or info.device) for n in names]
    out: list[tuple[ev.CampaignItem, Problem]] = []
    seen: set[str] = set()
    for suite, suite_name, name, device in refs:
        key = f"{suite_name}/{name}@{device}"  # a suite given as a folder is keyed by its name
        if key in seen:
            raise ConfigError(f"problems: {key} is named twice")
        seen.add(key)
        cfg = build_config(overrides=[f"problems=[{suite}/{name}@{device}]"])
        (problem,) = load_problems(cfg, on_warning=on_warning)
        item = ev.CampaignItem(
            key=key,
            suite=suite_name,
            problem=problem.name,
            device=device,
            language=problem.baseline.spec.language,
            op_type=problem.definition.op_type,
            content_hash=problem.content_hash(),
        )
        out.append((item, problem))
    return out


@dataclass
class CampaignPlan:
    """A campaign file, checked and resolved: its items and their problems, its device kinds,
    its memory and the bound on one call's cost (what `CampaignStarted` records)."""

    items: list[tuple[ev.CampaignItem, Problem]]
    devices: list[str]
    memory_uri: str
    max_call_usd: float


def prepare(
    spec: CampaignSpec,
    root: str,
    *,
    source: str = "campaign",
    on_warning: Callable[[str], None] | None = None,
) -> CampaignPlan:
    """Everything the campaign file names, checked before anything is created (no folder, no
    event store, no lock): the device kinds it keys settings by (`devices:`), its problems
    (suites, problems, each device's language), the config of every device's runs and the
    models' prices. A ConfigError names `source` (the file) and the key."""
    from suites.selection import check_kinds

    try:
        check_kinds([(f"devices.{kind}", kind) for kind in spec.devices])
        resolved = resolve_items(spec, on_warning=on_warning)
        devices = sorted({item.device for item, _ in resolved})
        uri = memory_uri(spec, root)
        check_configs(spec, devices, root, uri)
        try:
            max_call = max_call_bound(spec, devices, root, uri)
        except ValueError as e:  # a model without a price (actors.llm.pricing.UnpricedModelError)
            raise ConfigError(f"model: {e}") from e
    except ConfigError as e:
        raise ConfigError(f"{source}: {e}") from e
    return CampaignPlan(resolved, devices, uri, max_call)


def insight_sources(
    spec: CampaignSpec, items: list[ev.CampaignItem], devices: list[str], root: str, memory_uri: str
) -> dict[str, list[str]]:
    """Per item, the other items whose insights its runs' planners see: the memory's rule
    (`memory_index.retrieval.planner_sees`) under the memory settings of its device's runs
    (none with the memory off). Recorded in `CampaignStarted`: what the scheduler counts."""
    from memory_index.retrieval import planner_sees

    memory = {d: run_memory(spec, devices, root, memory_uri, d) for d in devices}
    out: dict[str, list[str]] = {}
    for it in items:
        m = memory[it.device]
        out[it.key] = [
            o.key
            for o in items
            if o.key != it.key
            and m.enabled
            and planner_sees(
                device=it.device,
                language=it.language,
                op_type=it.op_type,
                entry_device=o.device,
                entry_language=o.language,
                entry_op_type=o.op_type,
                cross_device_share=m.cross_device_share,
                same_device_only=m.same_device_only,
            )
        ]
    return out


def memory_uri(spec: CampaignSpec, root: str) -> str:
    from memory_index import default_uri, normalize_uri

    return normalize_uri(spec.memory or default_uri(root))


def max_call_bound(spec: CampaignSpec, devices: list[str], root: str, uri: str) -> float:
    """Before any call was seen: the most one call of the campaign's models may cost (its
    input bounded at PROMPT_TOKENS_BOUND tokens, its output at the role's max_tokens)."""
    if spec.budget.max_call_usd is not None:
        return spec.budget.max_call_usd
    from actors.llm.pricing import price_snapshot

    worst = 0.0
    for device in devices:
        model = spec.device(device).model or spec.model
        cfg = build_config(
            overrides=[*spec.set, f"llm.default.model={model}", f"root={root}", f"memory.uri={uri}"]
        )
        prices = price_snapshot(cfg.llm)
        for role in ev.LLM_ROLES:
            r = cfg.llm.for_role(role)
            p = prices.get(r.model)
            if p is not None:
                worst = max(
                    worst,
                    PROMPT_TOKENS_BOUND * p.input_cost_per_token + r.max_tokens * p.output_cost_per_token,
                )
    return worst


# --- the log ------------------------------------------------------------------------------------


async def _publish(url: str, events: list[ev.Event]) -> None:
    if not events:
        return
    elog = await EventLog.connect(url, name="accelopt-campaign")
    try:
        await elog.publish_many(events)
    finally:
        await elog.close()


async def _history(url: str, campaign_id: str) -> list[ev.Event]:
    elog = await EventLog.connect(url, name="accelopt-campaign")
    try:
        return await elog.history(campaign_id)
    finally:
        await elog.close()


async def _export(url: str, campaign_id: str, path: Path) -> None:
    elog = await EventLog.connect(url, name="accelopt-campaign")
    try:
        tmp = path.with_suffix(".tmp")
        await elog.export_run(campaign_id, str(tmp))
        tmp.replace(path)
    finally:
        await elog.close()


# --- the driver ----------------------------------------------------------------------------------


@dataclass
class CampaignOutcome:
    campaign_id: str
    view: CampaignView
    dir: Path
    interrupted: bool = False
    warnings: list[str] = field(default_factory=list)


class CampaignDriver:
    """Drives one campaign (`start` a new one from its file, or `resume` one from its log).
    `note(text)` is told what happens (a run scheduled and why, a run finished, a device parked)."""

    def __init__(
        self,
        campaign_id: str,
        *,
        root: str = "runs",
        nats_url: str | None = None,
        ray_address: str | None = None,
        log_level: str | None = None,
        note: Callable[[str], None] | None = None,
    ) -> None:
        self.campaign_id = campaign_id
        self.root = root
        self.nats_url, self.ray_address, self.log_level = nats_url, ray_address, log_level
        self.note = note or (lambda text: log.info(text))
        self.dir = campaign_dir(root, campaign_id)
        self.core = CampaignCore(campaign_id)
        self.problems: dict[str, Problem] = {}
        self.runs = CampaignRuns(campaign_id, root, log_level=log_level, note=self.note)
        self.warnings: list[str] = []

    @property
    def url(self) -> str:
        """The campaign's log (the runs' too), once `_drive` opened it."""
        return self.runs.url

    # --- entry points ---------------------------------------------------------------------------

    def start(
        self, spec: CampaignSpec, *, source: str = "campaign", plan: CampaignPlan | None = None
    ) -> CampaignOutcome:
        """A new campaign from its file (`source`: the file's name, for errors). The file is
        checked whole (`prepare`, unless `plan` is what it gave) before anything is created."""
        plan = plan or prepare(spec, self.root, source=source, on_warning=self._warn)
        self.problems = {item.key: p for item, p in plan.items}
        started = ev.CampaignStarted(
            **ev.envelope(ev.CampaignStarted, self.campaign_id, ts=time.time()),
            name=spec.name,
            spec=spec.to_dict(),
            items=[item for item, _ in plan.items],
            root=self.root,
            memory_uri=plan.memory_uri,
            max_call_usd=plan.max_call_usd,
            insight_sources=insight_sources(
                spec, [item for item, _ in plan.items], plan.devices, self.root, plan.memory_uri
            ),
            item_figures="measured",
        )
        return self._drive(started)

    def resume(self) -> CampaignOutcome:
        """Go on with a campaign from its log. A campaign this root (or `nats_url`'s stream)
        does not know is a CampaignError before anything is created."""
        why = unknown_campaign(self.campaign_id, self.root, self.nats_url)
        if why:
            raise CampaignError(why)
        return self._drive(None)

    # --- the loop ---------------------------------------------------------------------------------

    def _drive(self, started: ev.CampaignStarted | None) -> CampaignOutcome:
        from actors.runtime.pool import AgentPool
        from actors.runtime.session import RunError, create_stream, refuse_unisolated

        private_folder(self.root)
        self.dir.mkdir(parents=True, exist_ok=True)
        # RunBusy: another driver has it; a killed driver leaves the campaign `interrupted`
        lock = RunLock.of_campaign(self.root, self.campaign_id).__enter__()
        endpoint = open_log_endpoint(self.nats_url, self.root)
        self.runs.url = endpoint.url
        interrupted = False
        try:
            asyncio.run(create_stream(self.url, StreamSettings()))
            outbox = self._refold(started)
            if self.core.started is None:
                raise CampaignError(f"campaign {self.campaign_id}: no CampaignStarted on the log")
            self._publish(outbox)
            if self.core.stopped is not None:
                return self._outcome()
            spec = self.core.spec
            assert spec is not None
            if not self.problems:
                self._reload_problems(spec)
            devices = sorted({it.item.device for it in self.core.items.values()})
            cfg = agent_config(spec, devices, self.root, self.core.started.memory_uri)
            try:
                refuse_unisolated(cfg)
            except RunError as e:
                raise CampaignError(str(e)) from e
            if started is None:
                self._say_picked_up()
            self.note(
                f"starting the agents (Ray, the LLM roles, profilers for {', '.join(devices)}, the memory): "
                "the first run starts once they are up, usually within a minute"
            )
            pool = AgentPool(
                cfg, devices, nats_url=self.url, ray_address=self.ray_address, log_level=self.log_level
            )
            with pool:
                self._loop(pool)
        except KeyboardInterrupt:
            interrupted = True
        finally:
            with contextlib.suppress(Exception):
                self._export()
            endpoint.close()
            lock.__exit__(None, None, None)
        return self._outcome(interrupted=interrupted)

    def _refold(self, started: ev.CampaignStarted | None) -> list[ev.Event]:
        """Fold the campaign's log into the core; the decisions the log does not hold yet."""
        history = asyncio.run(_history(self.url, self.campaign_id))
        if started is not None and history:
            raise CampaignError(f"campaign {self.campaign_id} is already on the log: resume it instead")
        outbox: dict[str, ev.Event] = {}
        for e in history:
            outbox.pop(e.event_id, None)
            outbox.update((o.event_id, o) for o in self.core.step(e))
        inputs: list[ev.Event] = []
        if started is not None:
            inputs.append(started)
        elif self.core.started is not None and self.core.stopped is None:
            inputs.append(
                ev.CampaignResumed(
                    **ev.envelope(
                        ev.CampaignResumed, self.campaign_id, self.core.resumes + 1, ts=time.time()
                    ),
                    attempt=self.core.resumes + 1,
                )
            )
        out = list(outbox.values())  # what an earlier driver decided and did not publish: first
        for e in inputs:
            out += [e, *self.core.step(e)]
        return out

    def _say_picked_up(self) -> None:
        """On resume, before the agents' start: which runs it goes on with, and how."""
        done = sum(1 for r in self.core.runs.values() if r.finished is not None)
        picked = []
        for rec in self.core.running:
            run = rec.scheduled.run
            started, ended = asyncio.run(run_state(self.url, run))
            how = (
                "ended while no driver ran: read"
                if ended
                else "resumed from its log"
                if started
                else "started"
            )
            picked.append(f"{run} ({rec.scheduled.item}: {how})")
        runs = "; picks up " + ", ".join(picked) if picked else "; no run was under way: schedules the next"
        self.note(f"campaign {self.campaign_id}: {len(self.core.runs)} runs scheduled, {done} finished{runs}")

    def _reload_problems(self, spec: CampaignSpec) -> None:
        resolved = resolve_items(spec, on_warning=self._warn)
        self.problems = {item.key: p for item, p in resolved}
        for key, it in self.core.items.items():
            p = self.problems.get(key)
            if p is None:
                raise CampaignError(f"{key}: the campaign's problem is gone from its suite")
            if p.content_hash() != it.item.content_hash:
                self._warn(
                    f"{key}: its suite's problem changed since the campaign started; new runs use it as it is now"
                )

    def _loop(self, pool: AgentPool | None = None) -> None:
        revived_at = time.monotonic()
        while True:
            if pool is not None and time.monotonic() - revived_at >= REVIVE_EVERY_S:
                revived_at = time.monotonic()
                self._revive(pool)
            for rec in self.core.running:
                if rec.scheduled.run not in self.runs.threads:
                    self._start_thread(rec.scheduled)
            if self.core.stopped is not None:
                return
            if not self.core.running:
                if not self._wait_for_clock():
                    return
                continue
            try:
                ended = self.runs.ended.get(timeout=2.0)
            except queue.Empty:
                continue
            self.runs.done(ended.run_id)
            measured = self._measured(ended)
            finished = self._finished(ended)
            if measured is not None:
                self.core.step(measured)  # an input that decides nothing: the finish does
            outs = self.core.step(finished)
            self._publish([*([measured] if measured is not None else []), finished, *outs])

    def _revive(self, pool: AgentPool) -> None:
        """Start again the agents whose actors died for good (a device whose profilers died
        would wait forever). Housekeeping: where Ray fails to (the cluster busy or going, a
        name taken), it is said and tried again at the next turn, never the campaign's end."""
        try:
            revived = pool.revive()
        except Exception as e:
            self._warn(f"could not start dead agents again (tried again in {REVIVE_EVERY_S:g} s): {e}")
            return
        for text in revived:
            self._warn(f"agent started again after its actor died for good: {text}")
        for line in pool.deaths():  # what died, why and what to change (deaths.py)
            self._warn(line)

    def _wait_for_clock(self) -> bool:
        """Nothing runs: sleep until the day's budget renews (a paused campaign), then say so
        to the core. False where the core has nothing to wait for (it would have stopped)."""
        until = self.core.paused_until
        if until is None:
            return False
        self.note(
            f"paused until {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime(until))}: the day's budget is spent"
        )
        while time.time() < until:
            time.sleep(min(30.0, max(0.1, until - time.time())))
        tick = ev.CampaignTicked(
            **ev.envelope(ev.CampaignTicked, self.campaign_id, until, ts=time.time()),
            why="day",
        )
        self._publish([tick, *self.core.step(tick)])
        return True

    def _publish(self, events: list[ev.Event]) -> None:
        asyncio.run(_publish(self.url, events))
        for e in events:
            self._say(e)
        with contextlib.suppress(Exception):
            self._export()

    def _say(self, e: ev.Event) -> None:
        if isinstance(e, ev.CampaignRunScheduled):
            start = f" from {e.start_run}'s best" if e.start_run else ""
            budget = f", budget ${e.budget_usd:.2f}" if e.budget_usd is not None else ""
            self.note(f"run {e.index} {e.run_id}: {e.item}{start}{budget}; why: {e.reason.why}")
        elif isinstance(e, ev.CampaignRunFinished):
            it = self.core.items.get(e.item)
            gain = f"{e.gain:.2f}x over its start" if e.gain is not None else "nothing usable"
            if it is not None and it.measured_run == e.run:
                gain += f"; the item {figure_text(it)}"
            elif it is not None and it.measured_run is not None:  # not measured again: as it was
                gain += f"; the item {figure_text(it)}, as {it.measured_run} measured it"
            state = campaign_run_state(e, State(name="running")).label
            self.note(f"run {e.run} ({e.item}): {state}, {gain}, ${e.cost_usd:.4f}, {e.duration_s:.0f} s")
        elif isinstance(e, ev.CampaignDeviceParked):
            self.note(f"device {e.device} parked: {e.reason}")
        elif isinstance(e, ev.CampaignStopped):
            self.note(f"campaign completed: {e.reason}: {e.detail}")

    def _warn(self, text: str) -> None:
        self.warnings.append(text)
        self.note(f"warning: {text}")

    def _export(self) -> None:
        path = self.dir / LOG_NAME
        asyncio.run(_export(self.url, self.campaign_id, path))
        view = CampaignView.from_events(asyncio.run(_history(self.url, self.campaign_id)))
        from replay.campaign import summary

        state = campaign_state(view, DRIVEN, root=self.root)  # this process drives it
        (self.dir / SUMMARY_NAME).write_text(json.dumps(summary(view, state), indent=2) + "\n")

    def _outcome(self, *, interrupted: bool = False) -> CampaignOutcome:
        view = CampaignView(self.campaign_id)
        path = self.dir / LOG_NAME
        if path.is_file():
            from events.runsource import file_events

            for e in file_events(path):
                view.apply(e)
        return CampaignOutcome(self.campaign_id, view, self.dir, interrupted, self.warnings)

    # --- a run: its setup, then its end as the campaign's events (carried out by CampaignRuns) --------

    def _start_thread(self, s: ev.CampaignRunScheduled) -> None:
        try:  # here, not on the thread: the core is only read and written by this one
            setup: Setup = self._run_setup(s)
        except Exception as e:
            setup = e
        prev = self.core.runs[s.start_run].finished if s.start_run is not None else None
        origin = self.problems[s.item]
        start = prev.best_source if prev is not None else origin.baseline.entry_file().content
        measured_run = self.core.items[s.item].measured_run
        last = self.core.measures.get(measured_run) if measured_run is not None else None
        self.runs.start(s, origin, setup, start, last)

    def _measured(self, ended: RunEnd) -> ev.CampaignItemMeasured | None:
        if ended.measured is None:
            return None
        return self._of_run(ev.CampaignItemMeasured, ended, ended.measured)

    def _of_run(self, event_type: type[_E], ended: RunEnd, fields: dict) -> _E:
        """The `event_type` event of the ended run, the answer to its scheduling."""
        s = self.core.runs[ended.run_id].scheduled
        return event_type(
            **ev.envelope(
                event_type,
                self.campaign_id,
                ended.run_id,
                ts=time.time(),
                cause=ev.derive_event_id(self.campaign_id, "CampaignRunScheduled", s.index),
            ),
            # run, item: fields of each event type passed here, not of Event (what mypy checks against)
            **{"run": ended.run_id, "item": s.item, **fields},
        )

    def _run_setup(self, s: ev.CampaignRunScheduled) -> tuple[RunConfig, Problem]:
        spec, started = self.core.spec, self.core.started
        assert spec is not None and started is not None
        item = self.core.items[s.item].item
        problem = self.problems[s.item]
        if s.start_run is not None:
            prev = self.core.runs[s.start_run].finished
            if prev is None or prev.best_kernel_id != s.start_kernel or not prev.best_source:
                raise CampaignError(f"{s.run}: the kernel it starts from ({s.start_run}) is not on the log")
            problem = with_start_kernel(problem, prev.best_source)
        devices = sorted({it.item.device for it in self.core.items.values()})
        ref = f"{item.suite}/{item.problem}@{item.device}"
        return run_config(spec, devices, self.root, started.memory_uri, s, ref), problem

    def _finished(self, ended: RunEnd) -> ev.CampaignRunFinished:
        s = self.core.runs[ended.run_id].scheduled
        fields = ended.outcome if ended.outcome is not None else self.runs.outcome_fields(s, ended)
        finished = self._of_run(ev.CampaignRunFinished, ended, fields)
        record_campaign_run(self.root, finished)  # a run whose log has no end: its lock says how it ended
        return finished
