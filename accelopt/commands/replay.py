"""`accelopt replay RUN [--verify] [--iteration K]`: a recorded run, re-driven or inspected."""

from __future__ import annotations

import argparse

from accelopt.commands.run import NATS_HELP, ROOT_HELP, load_run_events, wide_console


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("replay", help="fold a recorded run; --verify re-drives its coordinator decisions")
    p.add_argument("run", help="run id (under --root or on the log) or an exported .aolog file")
    p.add_argument("--verify", action="store_true", help="check every recorded decision against a re-drive")
    p.add_argument("--iteration", type=int, help="show the state at the end of this iteration")
    p.add_argument("--root", default="runs", help=ROOT_HELP)
    p.add_argument("--nats", help=NATS_HELP)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from accelopt.commands._progress import results_table
    from replay.fold import RunView

    console = wide_console()
    if args.verify:
        from events.runsource import RunNotFound, fold_events
        from replay.verify import Verifier

        verifier = Verifier()  # fed as the log is read: a long run's history is never held
        try:
            fold_events(args.run, args.root, verifier.feed, nats_url=args.nats)
        except RunNotFound as e:
            console.print(f"[red]{e}[/red]")
            return 2
        report = verifier.result()
        if report.ok:
            console.print(f"[green]verified[/green]: {report.decisions_checked} coordinator decisions re-derived "
                          f"from {report.inputs} recorded results ({report.events} events)")
            if report.pending_at_end:
                console.print(f"the recording ends before {len(report.pending_at_end)} decisions were published "
                              "(an interrupted run; `accelopt resume` publishes them)")
            return 0
        d = report.divergence
        assert d is not None
        console.print(f"[red]diverges[/red] at {d.describe()}")
        return 1
    events = load_run_events(console, args)
    if events is None:
        return 2
    view = RunView.from_events(events, until_iteration=args.iteration)
    title = f"run {view.run_id}: {view.status}" + (f", state after iteration {args.iteration}"
                                                    if args.iteration is not None else "")
    console.print(results_table(view, title))
    for name, p in sorted(view.problems.items()):
        for it, beam in sorted(p.beams.items()):
            members = ", ".join(
                f"{k[:8]} ({view.kernels[k].latency_ms:.3f} ms)" if k in view.kernels and view.kernels[k].latency_ms
                else k[:8] for k in beam)
            console.print(f"  {name} iteration {it}: beam {members}")
    return 0
