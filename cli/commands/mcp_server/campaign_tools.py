"""The campaign tools (start_campaign, watch_campaign, stop_campaign) over `campaigns.py`."""

from __future__ import annotations

import asyncio

from cli.commands.mcp_server.campaigns import Campaigns
from cli.commands.mcp_server.records import CampaignRef, CampaignStatus, StartCampaignArgs
from cli.commands.mcp_server.tool import Ctx, ToolSpec


def campaign_tools(campaigns: Campaigns) -> tuple[ToolSpec, ...]:
    """Campaigns of the server's root: many runs over many problems, scheduled, within a budget."""

    async def start(ctx: Ctx, args: StartCampaignArgs) -> tuple[CampaignStatus, str]:
        s = await campaigns.start(args)
        return s, f"campaign {s.campaign_id} started ({s.state}), budget ${args.budget_usd:g}"

    async def watch(ctx: Ctx, args: CampaignRef) -> tuple[CampaignStatus, str]:
        s = await asyncio.to_thread(campaigns.status, args.campaign_id)
        return s, _line(s)

    async def stop(ctx: Ctx, args: CampaignRef) -> tuple[CampaignStatus, str]:
        s = await campaigns.stop(args.campaign_id)
        return s, _line(s)

    return (
        ToolSpec(
            "start_campaign",
            "Start an `accelopt campaign run` under this server's runs root and memory: problems "
            "(SUITE/PROBLEM or SUITE/PROBLEM@DEVICE) worked on one run after another as its "
            "scheduler decides, until they settle, its budget_usd (the hard LLM budget in total; "
            "daily_usd a day) is spent, `minutes` pass or `max_runs` ran. Returns once its driver "
            "holds the campaign; watch_campaign follows it.",
            StartCampaignArgs,
            CampaignStatus,
            start,
        ),
        ToolSpec(
            "watch_campaign",
            "A campaign's state as `accelopt campaign status` gives it (its items' speedups over "
            "their baselines and how each was measured, % of peak, runs, spend against its "
            "budget), any campaign of this root.",
            CampaignRef,
            CampaignStatus,
            watch,
        ),
        ToolSpec(
            "stop_campaign",
            "Stop a campaign this server started (SIGTERM, as Ctrl-C: its driver unwinds and "
            "exports its log; `accelopt campaign resume` goes on with it). The result says the "
            "state it was left in.",
            CampaignRef,
            CampaignStatus,
            stop,
        ),
    )


def _line(s: CampaignStatus) -> str:
    speed = f", speedup {s.speedup_geomean:.2f}x" if s.speedup_geomean else ""
    budget = f" of ${s.budget_usd:g}" if s.budget_usd is not None else ""
    return f"campaign {s.campaign_id}: {s.label or s.state}, {s.runs} runs{speed}, ${s.spent_usd:.4f}{budget}"
