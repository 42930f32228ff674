"""start_campaign, watch_campaign and stop_campaign: `accelopt campaign run` processes this
server starts under its root and memory (docs/campaigns.md: a scheduler's runs, one after
another, within the campaign's budget), their state as `accelopt campaign status` says it, and
a SIGTERM to stop one (only a campaign this server started).

The campaign's file is written by the server from the tool's arguments (`campaign_file`), into
the session's folder: an agent names problems of registered suites, a budget and when to stop,
never a file, a `set` of the runs' config (the sandbox's among them) or another memory."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cli.commands.mcp_server import problems, processes, replays
from cli.commands.mcp_server.records import CampaignItemRow, CampaignStatus, StartCampaignArgs

STOP_GRACE_S = 120.0  # a driver unwinds its agents (Ray) and exports its log before its lock goes


class CampaignError(RuntimeError):
    """A campaign tool cannot do what was asked; one line."""


@dataclass
class _Started:
    proc: subprocess.Popen[bytes]
    output: Path


class Campaigns:
    def __init__(self, root: str | Path, memory_uri: str, output_dir: Path) -> None:
        self.root = Path(root)
        self.memory_uri = memory_uri
        self.output_dir = output_dir
        self._started: dict[str, _Started] = {}

    def campaign_file(self, a: StartCampaignArgs) -> dict[str, Any]:
        """The campaign file of `a` (blocking: it loads the problems), checked as `campaign
        run` checks a file's keys; UnknownError or CampaignError (one line) where it is wrong."""
        from accelopt.campaign import spec_from_dict
        from accelopt.config import ConfigError

        refs: list[str] = []
        devices: list[str] = []
        for ref in a.problems:
            head, _, device = ref.partition("@")
            _, kind, _ = problems.resolve(head, device or None)  # a registered suite's, on a known device
            refs.append(f"{head}@{kind}")
            devices += [kind] if kind not in devices else []
        runs: dict[str, Any] = {"profilers": 1, "preset": a.preset}
        if a.iterations is not None:
            runs["set"] = [f"search.iterations={a.iterations}"]
        stop = {
            "max_hours": a.minutes / 60.0 if a.minutes is not None else None,
            "max_runs": a.max_runs,
            "target_pct_peak": a.target_pct_peak,
        }
        data: dict[str, Any] = {
            "name": a.name,
            "seed": a.seed,
            "model": a.model,
            "problems": refs,
            "devices": {kind: dict(runs) for kind in devices},
            "budget": {"total_usd": a.budget_usd, "daily_usd": a.daily_usd},
            "stop": {k: v for k, v in stop.items() if v is not None},
            "scheduler": {"policy": a.policy},
            "memory": self.memory_uri,
        }
        try:
            spec_from_dict(data, source="start_campaign")
        except ConfigError as e:
            raise CampaignError(str(e)) from None
        return data

    async def start(self, a: StartCampaignArgs) -> CampaignStatus:
        from events.runsource import CAMPAIGNS_DIR

        data = await asyncio.to_thread(self.campaign_file, a)
        n = len(self._started)
        path = self.output_dir / f"campaign-{time.strftime('%H%M%S')}-{os.getpid()}-{n}.yaml"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(data, indent=1) + "\n")  # JSON is YAML
        output = path.with_suffix(".out")
        proc = processes.spawn(["campaign", "run", str(path), "--root", str(self.root)], output)
        campaigns = self.root / CAMPAIGNS_DIR
        try:
            campaign_id = await processes.wait_for_lock(
                proc, output, lambda: sorted(campaigns.glob("*/run.lock")), "accelopt campaign run"
            )
        except processes.StartError as e:
            raise CampaignError(str(e)) from None
        self._started[campaign_id] = _Started(proc, output)
        return await asyncio.to_thread(self.status, campaign_id)

    def status(self, campaign_id: str) -> CampaignStatus:
        """Blocking (it folds the campaign's log: its export, else the root's event stream)."""
        from events.runsource import LOG_DAMAGE, LOG_NAME, RunNotFound
        from replay.campaign import campaign_dir, geomean_speedup, item_rows, load_campaign, run_states
        from replay.states import campaign_driver, campaign_state

        started = self._started.get(campaign_id)
        try:
            view = load_campaign(replays.log_source(self.root, campaign_id), str(self.root))
        except (replays.ReplayError, RunNotFound) as e:
            if started is None:
                raise CampaignError(str(e)) from None
            code = started.proc.poll()
            if code is None:  # it holds its lock; its first event is not out yet
                return CampaignStatus(campaign_id=campaign_id, state="starting", pid=started.proc.pid)
            return CampaignStatus(
                campaign_id=campaign_id,
                state=processes.stopped_state(code),
                label=f"ended before its log began (exit {code})",
                output_tail=processes.tail(started.output),
            )
        except LOG_DAMAGE as e:
            raise CampaignError(f"campaign {campaign_id}: {e}") from None
        source = "file" if (campaign_dir(self.root, campaign_id) / LOG_NAME).is_file() else "stream"
        state = campaign_state(
            view, campaign_driver(self.root, campaign_id), source=source, root=str(self.root)
        )
        rows = item_rows(view, state)
        budget = view.spec.budget if view.spec is not None else None
        live = started is not None and started.proc.poll() is None
        return CampaignStatus(
            campaign_id=campaign_id,
            state=state.name,
            label=state.label,
            stopped=view.stopped.reason if view.stopped is not None else "",
            runs=len(view.runs),
            running=[run for run, st in run_states(view, state).items() if st.name == "running"],
            items=[
                CampaignItemRow(
                    item=r.item,
                    device=r.device,
                    runs=r.runs,
                    speedup=r.speedup,
                    pct_peak=r.pct_peak,
                    estimated=r.estimated,
                    figures=r.figures,
                    state=r.state,
                    why=r.why,
                    cost_usd=r.cost_usd,
                )
                for r in rows
            ],
            speedup_geomean=geomean_speedup(rows, estimated=False),
            speedup_geomean_estimated=geomean_speedup(rows, estimated=True),
            spent_usd=view.spent_usd,
            budget_usd=budget.total_usd if budget is not None else None,
            daily_usd=budget.daily_usd if budget is not None else None,
            resume=state.resume,
            pid=started.proc.pid if started is not None and live else None,
            output_tail=processes.tail(started.output) if started is not None else "",
        )

    async def stop(self, campaign_id: str) -> CampaignStatus:
        started = self._started.get(campaign_id)
        if started is None:
            raise CampaignError(
                f"campaign {campaign_id!r} was not started by this server: stop it where it runs"
            )
        await processes.stop(started.proc, STOP_GRACE_S)
        return await asyncio.to_thread(self.status, campaign_id)
