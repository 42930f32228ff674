"""`accelopt replay RUN [--verify] [--iteration K]`: a recorded run, re-driven or inspected."""

from __future__ import annotations

import argparse
import functools
from collections.abc import Callable
from typing import Any, TypeVar

from rich.console import Console

from cli.console import wide_console
from cli.errors import error
from cli.options import NATS_HELP, ROOT_HELP
from cli.run_log import add_valid_prefix_arg, damage_message


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("replay", help="fold a recorded run; --verify re-drives its coordinator decisions")
    p.add_argument("run", help="run id (under --root or on the log) or an exported .aolog file")
    p.add_argument("--verify", action="store_true", help="check every recorded decision against a re-drive")
    p.add_argument("--iteration", type=int, help="show the state at the end of this iteration")
    p.add_argument("--root", default="runs", help=ROOT_HELP)
    p.add_argument("--nats", help=NATS_HELP)
    add_valid_prefix_arg(p)
    p.set_defaults(func=run)


T = TypeVar("T")


def _read_log(console: Console, read: Callable[[], T], warnings: list[str]) -> T | None:
    """`read()` the run's log; None after saying why it could not be read (the command then
    exits 2), else its result, after the warnings it gave (a damaged log's valid prefix)."""
    from events.runsource import LOG_DAMAGE, RunNotFound

    try:
        out = read()
    except LOG_DAMAGE as e:
        error(damage_message(e))
        return None
    except (RunNotFound, ConnectionError) as e:
        error(str(e))
        return None
    for w in warnings:
        console.print(f"[yellow]warning:[/yellow] {w}", soft_wrap=True)
    return out


def _read_run(console: Console, args: argparse.Namespace, read: Callable[..., T]) -> T | None:
    """`_read_log` of `read(run, root, nats_url=, valid_prefix=, warnings=)` with the run and
    the log options the command was given."""
    warnings: list[str] = []
    return _read_log(
        console,
        lambda: read(
            args.run, args.root, nats_url=args.nats, valid_prefix=args.valid_prefix, warnings=warnings
        ),
        warnings,
    )


def run(args: argparse.Namespace) -> int:
    console = wide_console()
    return _verify(console, args) if args.verify else _show(console, args)


def _verify(console: Console, args: argparse.Namespace) -> int:
    """`--verify`: re-derive every recorded decision of the run (or the campaign)."""
    from events.runsource import fold_events

    verifier = AnyVerifier()  # fed as the log is read: a long run's history is never held
    read = _read_run(console, args, functools.partial(fold_events, on_event=verifier.feed))
    if read is None:
        return 2
    try:
        report = verifier.result()
    except ValueError as e:  # no events (an empty valid prefix)
        return error(str(e))
    if verifier.campaign is not None:
        return _verified_campaign(console, args, report, verifier.campaign)
    if report.ok:
        console.print(
            f"[green]verified[/green]: {report.decisions_checked} coordinator decisions re-derived "
            f"from {report.inputs} recorded results ({report.events} events)"
        )
        if report.pending_at_end:
            console.print(
                f"the recording ends before {len(report.pending_at_end)} decisions were published "
                "(an interrupted run; `accelopt resume` publishes them)"
            )
        return 0
    d = report.divergence
    assert d is not None
    return error(f"diverges at {d.describe()}", 1)


def _show(console: Console, args: argparse.Namespace) -> int:
    """Without `--verify`: the run's results and beams (at `--iteration`), or a campaign's status."""
    from cli.progress import results_table
    from replay.runs import open_run

    opened = _read_run(console, args, functools.partial(open_run, until_iteration=args.iteration))
    if opened is None:
        return 2
    view, _ = opened
    if view.started is None:
        from replay.campaign import CampaignView, load_campaign

        campaign = _read_log(console, lambda: load_campaign(args.run, args.root, nats_url=args.nats), [])
        if isinstance(campaign, CampaignView):
            from cli.campaign_status import print_status

            print_status(console, campaign, args.root)
            return 0
    from events.runsource import run_log_path
    from replay.states import run_driver, run_state

    state = run_state(  # as `accelopt runs` says it
        view.status,
        run_driver(args.root, view.run_id or ""),
        source="file" if run_log_path(args.run, args.root) else "stream",
        last_ts=view.last_ts,
        run_id=view.run_id or "",
        root=args.root,
    )
    title = f"run {view.run_id}: {state.label}" + (
        f", state after iteration {args.iteration}" if args.iteration is not None else ""
    )
    console.print(results_table(view, title))
    for name, p in sorted(view.problems.items()):
        for it, beam in sorted(p.beams.items()):
            members = ", ".join(
                f"{k[:8]} ({view.kernels[k].latency_ms:.3f} ms)"
                if k in view.kernels and view.kernels[k].latency_ms
                else k[:8]
                for k in beam
            )
            console.print(f"  {name} iteration {it}: beam {members}")
    return 0


class AnyVerifier:
    """The verifier for what the log holds: a run's coordinator decisions, or a campaign's
    scheduler decisions (its first event says which)."""

    def __init__(self) -> None:
        self.inner: Any = None
        self.campaign: Any = None  # the campaign's view, folded on the way

    def feed(self, e: Any) -> bool:
        if self.inner is None:
            from replay.campaign import CampaignDecider, CampaignView, is_campaign_event
            from replay.verify import Verifier

            if is_campaign_event(e):
                self.inner, self.campaign = Verifier(CampaignDecider), CampaignView()
            else:
                self.inner = Verifier()
        if self.campaign is not None:
            self.campaign.apply(e)
        return bool(self.inner.feed(e))

    def result(self) -> Any:
        if self.inner is None:
            raise ValueError("empty log: nothing to verify")
        return self.inner.result()


def _verified_campaign(console: Console, args: argparse.Namespace, report: Any, campaign: Any) -> int:
    """A campaign verifies when its schedule re-derives and each of its runs verifies."""
    from events.runsource import LOG_DAMAGE, RunNotFound, fold_events
    from replay.verify import Verifier

    if report.divergence is not None:
        return error(f"diverges at {report.divergence.describe()}", 1)
    console.print(
        f"[green]verified[/green]: {report.decisions_checked} scheduler decisions of campaign {report.run_id} "
        f"re-derived from {report.inputs} recorded inputs ({report.events} events)"
    )
    if report.pending_at_end:
        console.print(
            f"the log ends before {len(report.pending_at_end)} decisions were published (an interrupted "
            "campaign; `accelopt campaign resume` publishes them)"
        )
    bad = 0
    checked = 0
    for run_id, run in campaign.runs.items():
        v = Verifier()
        try:
            fold_events(run_id, args.root, v.feed, nats_url=args.nats)
            r = v.result()
        except RunNotFound:
            if run.finished is not None and run.finished.status != "error":
                bad += 1
                error(f"{run_id}: its log is missing", 1)
            continue
        except (*LOG_DAMAGE, ValueError) as e:
            bad += 1
            error(f"{run_id}: {damage_message(e)}", 1)
            continue
        checked += 1
        if r.divergence is not None:
            bad += 1
            error(f"{run_id} diverges at {r.divergence.describe()}", 1)
    if bad:
        return error(f"{bad} of the campaign's {len(campaign.runs)} runs do not verify", 1)
    console.print(f"[green]verified[/green]: each of its {checked} runs' coordinator decisions re-derived")
    return 0
