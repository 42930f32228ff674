"""`accelopt ablate RUN --set key=value [--from-iteration K]`: a counterfactual run.

A new run of the same problems with changed settings. LLM replies, profiles and memory
retrievals are served from RUN's recording whenever they would be the same (same prompt
content hash, same kernel source, same retrieval), so only what the change alters costs
LLM calls or device time. With --from-iteration K the change takes effect after iteration
K; up to K the new run repeats RUN (everything served from the recording).
"""

from __future__ import annotations

import argparse
import time

from cli.console import wide_console
from cli.errors import error
from cli.options import NATS_HELP, RAY_HELP, ROOT_HELP, TIMEOUT_HELP, add_set_arg
from cli.run_log import load_run_events
from cli.session import execute


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "ablate", help="re-run a recorded run with changed settings, reusing what is unchanged"
    )
    p.add_argument("run", help="run id (under --root or on the log) or an exported .aolog file")
    add_set_arg(
        p, "a setting to change from the recorded run's (repeatable), e.g. --set memory.enabled=false"
    )
    p.add_argument("--from-iteration", type=int, help="apply the change after this iteration")
    p.add_argument("--run-id", help="id of the new run (default: generated)")
    p.add_argument("--root", default="runs", help=ROOT_HELP)
    p.add_argument("--nats", help=NATS_HELP)
    p.add_argument("--ray-address", help=RAY_HELP)
    p.add_argument("--timeout", type=float, help=TIMEOUT_HELP)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from accelopt import catalog as ev
    from accelopt.config import ConfigError, apply_overrides, config_from_dict
    from actors.runtime.session import new_run_id, price_snapshot, toolchain
    from events.runsource import ensure_on_stream

    console = wide_console()
    events = load_run_events(args)
    if events is None:
        return 2
    parent = next((e for e in events if isinstance(e, ev.RunStarted)), None)
    if parent is None:
        return error(f"run {args.run} has no RunStarted")
    try:
        # the new run lives under --root (an exported file's recorded root may be anywhere)
        settings = apply_overrides(parent.config, [f"root={args.root}", *args.overrides])
        cfg = config_from_dict(settings, source="--set")
    except ConfigError as e:
        return error(str(e), label="config error:")
    ensure_on_stream(events, args.root, nats_url=args.nats)  # the agents read the recording from the log
    run_id = args.run_id or new_run_id()
    fork = args.from_iteration
    start = ev.RunStarted(
        **ev.envelope(ev.RunStarted, run_id, ts=time.time()),
        config=cfg.to_dict(),
        seed=cfg.seed,
        targets=list(parent.targets),
        prices=price_snapshot(cfg),
        toolchain=toolchain(sorted({t.device for t in parent.targets})),
        parent_run=parent.run_id,
        fork_iteration=fork,
        fork_config=parent.config if fork is not None else None,
        kernel_ids=parent.kernel_ids,  # the parent's kernel ids, so its recording serves the fork
    )
    changes = ", ".join(args.overrides) or "no changes"
    console.print(
        f"ablation {run_id} of {parent.run_id}: {changes}"
        + (f", from iteration {fork}" if fork is not None else "")
    )
    return execute(console, cfg, [t.problem for t in parent.targets], args, started_event=start)
