"""`accelopt replay RUN [--verify] [--iteration K]`: a recorded run, re-driven or inspected."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import TypeVar

from rich.console import Console

from cli.commands.run import NATS_HELP, ROOT_HELP, add_valid_prefix_arg, damage_message, wide_console


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
        console.print(f"[red]{damage_message(e)}[/red]", soft_wrap=True)
        return None
    except (RunNotFound, ConnectionError) as e:
        console.print(f"[red]{e}[/red]")
        return None
    for w in warnings:
        console.print(f"[yellow]warning:[/yellow] {w}", soft_wrap=True)
    return out


def run(args: argparse.Namespace) -> int:
    from cli.commands._progress import results_table
    from events.runsource import fold_events

    console = wide_console()
    warnings: list[str] = []
    if args.verify:
        from replay.verify import Verifier

        verifier = Verifier()  # fed as the log is read: a long run's history is never held
        read = _read_log(
            console,
            lambda: fold_events(
                args.run,
                args.root,
                verifier.feed,
                nats_url=args.nats,
                valid_prefix=args.valid_prefix,
                warnings=warnings,
            ),
            warnings,
        )
        if read is None:
            return 2
        try:
            report = verifier.result()
        except ValueError as e:  # no events (an empty valid prefix)
            console.print(f"[red]{e}[/red]")
            return 2
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
        console.print(f"[red]diverges[/red] at {d.describe()}")
        return 1
    from replay.runs import open_run

    opened = _read_log(
        console,
        lambda: open_run(
            args.run,
            args.root,
            nats_url=args.nats,
            until_iteration=args.iteration,
            valid_prefix=args.valid_prefix,
            warnings=warnings,
        ),
        warnings,
    )
    if opened is None:
        return 2
    view, _ = opened
    title = f"run {view.run_id}: {view.status}" + (
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
