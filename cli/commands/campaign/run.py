"""`accelopt campaign run FILE`: start a campaign from its file (docs/campaigns.md)."""

from __future__ import annotations

import argparse

from cli.commands.campaign._drive import add_common_args, drive


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("run", help="start a campaign from its YAML file and drive it until it stops")
    p.add_argument("file", help="the campaign file (YAML)")
    p.add_argument("--id", dest="campaign_id", help="the campaign's id (default: its name and the time)")
    p.add_argument("--minutes", type=float, help="stop after this many minutes (sets stop.max_hours)")
    p.add_argument("--seed", type=int, help="the campaign's seed (its runs' seeds derive from it)")
    add_common_args(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Every key of the file is checked, and its problems and device kinds resolved, before
    anything is created (no folder, no event store, no lock); an error is one line on stderr
    naming the file and the key, exit 2."""
    from accelopt.campaign import load_spec, spec_from_dict
    from accelopt.config import ConfigError
    from actors.runtime.campaign import new_campaign_id, prepare
    from cli.console import wide_console
    from cli.errors import error
    from events.subjects import check_run_id
    from replay.campaign import campaign_dir
    from replay.runstate import campaign_resume_command

    console = wide_console()
    warnings: list[str] = []
    try:
        spec = load_spec(args.file)
        data = spec.to_dict()
        if args.minutes is not None:
            data["stop"]["max_hours"] = args.minutes / 60.0
        if args.seed is not None:
            data["seed"] = args.seed
        spec = spec_from_dict(data, source=args.file)
        plan = prepare(spec, args.root, source=args.file, on_warning=warnings.append)
    except ConfigError as e:
        return error(str(e), label="campaign file error:")
    try:
        campaign_id = check_run_id(args.campaign_id or new_campaign_id(spec.name))
    except ValueError as e:
        return error(f"--id: {e}")
    if campaign_dir(args.root, campaign_id).exists():
        return error(
            f"campaign {campaign_id} exists under {args.root}: to go on with it, "
            f"{campaign_resume_command(campaign_id, args.root)}"
        )
    entries = len(spec.problems)
    console.print(
        f"campaign [bold]{campaign_id}[/bold]: {entries} problem entr{'ies' if entries != 1 else 'y'}, "
        f"policy {spec.scheduler.policy}, model {spec.model}"
    )
    for w in warnings:
        console.print(f"[yellow]warning:[/yellow] {w}", soft_wrap=True, highlight=False)
    return drive(console, args, campaign_id, spec, source=args.file, plan=plan)
