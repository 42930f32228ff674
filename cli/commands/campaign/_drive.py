"""What `campaign run` and `campaign resume` share: driving the campaign and saying how it went."""

from __future__ import annotations

import argparse
import time

from rich.console import Console
from rich.markup import escape

from cli.options import NATS_HELP, RAY_HELP, ROOT_HELP

# the reasons a campaign ends that leave nothing to do; any other end (or none) exits 1
DONE_REASONS = ("settled", "budget", "time", "max_runs")


def add_common_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--root", default="runs", help=ROOT_HELP)
    p.add_argument("--nats", help=NATS_HELP)
    p.add_argument("--ray-address", help=RAY_HELP)


def drive(
    console: Console, args: argparse.Namespace, campaign_id: str, spec=None, source: str = "", plan=None
) -> int:
    """Start the campaign (`spec`, read from the file `source`, `plan`: it checked) or resume
    it, drive it until it stops, print its status; the exit status."""
    from accelopt.config import ConfigError
    from actors.runtime.campaign import CampaignDriver, CampaignError
    from actors.runtime.session import RunError
    from cli.errors import error
    from replay.runstate import RunBusy

    def note(text: str) -> None:
        console.print(
            f"[dim]{time.strftime('%H:%M:%S')}[/dim] {escape(text)}", soft_wrap=True, highlight=False
        )

    driver = CampaignDriver(
        campaign_id,
        root=args.root,
        nats_url=args.nats,
        ray_address=args.ray_address,
        log_level=args.log_level,
        note=note,
    )
    try:
        started = spec is not None
        outcome = driver.start(spec, source=source or "campaign", plan=plan) if started else driver.resume()
    except ConfigError as e:  # it names the file and the key
        return error(str(e), label="campaign file error:")
    except (CampaignError, RunError, RunBusy) as e:
        return error(str(e), label=f"campaign {campaign_id}:")
    from cli.campaign_status import print_status

    print_status(console, outcome.view, args.root)
    if outcome.interrupted or outcome.view.stopped is None:
        return 1  # print_status said how to go on
    return 0 if outcome.view.stopped.reason in DONE_REASONS else 1
