"""`accelopt run`: optimize a suite's problems with the AccelOpt loop."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

from rich.console import Console

from accelopt import catalog as ev
from accelopt.config import ConfigError, RunConfig, build_config, problem_refs, target_devices
from cli.errors import error

if TYPE_CHECKING:
    from actors.runtime.session import RunOutcome

# the help of flags that several commands share (one wording each)
ROOT_HELP = "runs directory: run folders, the embedded event server, the default memory (default ./runs)"
SET_HELP = (
    "override a config key (repeatable), e.g. --set search.beam_width=4 (the keys: the fields of "
    "accelopt/config.py)"
)
RAY_HELP = "Ray cluster address (default: a local Ray)"
NATS_HELP = "NATS URL of a running deployment (default: the root's embedded server)"
TIMEOUT_HELP = "give up after this many seconds, counted from the start (the agents' start-up included)"
DEFAULT_PRESET = "quick"


def preset_help() -> str:
    """`--preset`'s help: each preset's settings, from the presets themselves."""
    from accelopt.config import PRESETS

    def what(name: str) -> str:
        d = PRESETS[name]
        s = d.get("search", {})
        text = (
            f"B={s.get('beam_width')} N={s.get('plans_per_candidate')} K={s.get('samples_per_plan')} "
            f"T={s.get('iterations')}"
        )
        return text + "".join(f", {k} {d[k]}" for k in ("suite", "device") if k in d)

    return "search preset (default quick): " + "; ".join(f"{n} ({what(n)})" for n in PRESETS)


def add_config_args(p: argparse.ArgumentParser) -> None:
    """Flags shared by run-like commands (run, demo, up)."""
    p.add_argument("--preset", choices=list(_presets()), default=DEFAULT_PRESET, help=preset_help())
    p.add_argument("--config", help="YAML config file (applied over the preset; --set over both)")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE", help=SET_HELP)
    p.add_argument("--model", help="model for every agent (litellm name, e.g. openai/gpt-4o-mini)")
    p.add_argument("--api-base", help="OpenAI-compatible base URL for --model")
    p.add_argument("--budget", type=float, help="hard LLM budget in USD (default llm.budget_usd, 50)")
    p.add_argument("--allow-unpriced", action="store_true", help="run models without a known price (cost 0)")
    p.add_argument(
        "--price",
        nargs=2,
        type=float,
        metavar=("IN", "OUT"),
        help="USD per million input/output tokens for --model (0 allowed)",
    )
    p.add_argument(
        "--memory",
        help="memory URI: a folder or s3://bucket/prefix (default: $ACCELOPT_MEMORY, else "
        "<root>/memory, shared by every run of the root)",
    )
    p.add_argument(
        "--seed", type=int, help="the run's seed (correctness inputs, sampling; default from the config)"
    )
    p.add_argument("--root", help=ROOT_HELP)
    p.add_argument("--nats", help=NATS_HELP)
    p.add_argument("--ray-address", help=RAY_HELP)
    add_preflight_arg(p)


def _presets() -> list[str]:
    from accelopt.config import PRESETS

    return list(PRESETS)


def add_preflight_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--preflight",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="before starting, make one tiny real call per model and report its latency (default on; "
        "keys, providers and api_base are always checked)",
    )


def config_from_args(args: argparse.Namespace) -> RunConfig:
    overrides = list(args.overrides)
    if getattr(args, "suite", None):
        overrides.append(f"suite={args.suite}")
    if getattr(args, "problems", None):
        overrides.append(f"problems=[{args.problems}]")
    if getattr(args, "device", None):
        overrides.append(f"device={args.device}")
    if args.model:
        overrides.append(f"llm.default.model={args.model}")
    if args.api_base:
        overrides.append(f"llm.default.api_base={args.api_base}")
    if args.budget is not None:
        overrides.append(f"llm.budget_usd={args.budget}")
    if args.allow_unpriced:
        overrides.append("llm.allow_unpriced=true")
    if args.memory:
        overrides.append(f"memory.uri={args.memory}")
    if args.seed is not None:
        overrides.append(f"seed={args.seed}")
    if args.root:
        overrides.append(f"root={args.root}")
    cfg = build_config(preset=args.preset, file=args.config, overrides=overrides)
    if args.price:
        import msgspec

        from accelopt.records import ModelPrice

        model = cfg.llm.default.model or ""
        price = ModelPrice(
            input_cost_per_token=args.price[0] / 1e6,
            output_cost_per_token=args.price[1] / 1e6,
            source="config",
        )
        cfg = msgspec.structs.replace(
            cfg, llm=msgspec.structs.replace(cfg.llm, prices={**cfg.llm.prices, model: price})
        )
    return cfg


def wide_console() -> Console:
    """A console that does not squeeze tables to 80 columns when output is not a terminal."""
    console = Console()
    if not console.is_terminal:
        console = Console(width=160)
    return console


def add_valid_prefix_arg(p: argparse.ArgumentParser) -> None:
    """`--valid-prefix` for the commands that read a run's log."""
    p.add_argument(
        "--valid-prefix",
        action="store_true",
        help="where the log is damaged, use the events before the damage (with a warning) instead of "
        "stopping with an error",
    )


def damage_message(e: Exception) -> str:
    """A damaged log's error (it names where), and what the user can do."""
    from events.codec import EventDecodeError, StreamIntegrityError
    from events.logfile import LogIntegrityError

    if isinstance(e, LogIntegrityError | StreamIntegrityError | EventDecodeError):
        return f"{e}\nthe log is damaged there; --valid-prefix works on the events before it"
    return str(e)


def load_run_events(
    console: Console, args: argparse.Namespace, *, prefer_stream: bool = False
) -> list[ev.Event] | None:
    """The events of run `args.run` (under `args.root`, or on `args.nats`), or None after
    saying why there are none (the command then exits 2)."""
    from events.runsource import RunNotFound, load_events

    try:
        return load_events(args.run, args.root, nats_url=args.nats, prefer_stream=prefer_stream)
    except RunNotFound as e:
        error(str(e))
        return None


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("run", help="optimize a suite's problems with the AccelOpt loop")
    p.add_argument("--suite", help="problem suite (default cpu)")
    p.add_argument(
        "--problems",
        help="comma-separated problems: NAME (of --suite, on --device), SUITE/NAME or "
        "SUITE/NAME@DEVICE (default: all of the suite)",
    )
    p.add_argument("--device", help="device kind to optimize for (default cpu)")
    p.add_argument("--timeout", type=float, help=TIMEOUT_HELP)
    add_config_args(p)
    p.set_defaults(func=run)


def config_and_problems(console: Console, args: argparse.Namespace) -> tuple[RunConfig, list] | None:
    """The run's config and problems from the flags; None (after saying why) if they are bad."""
    from suites.selection import load_problems

    try:
        cfg = config_from_args(args)
        return cfg, load_problems(
            cfg,
            on_warning=lambda text: console.print(
                f"[yellow]warning:[/yellow] {text}", soft_wrap=True, highlight=False
            ),
        )
    except ConfigError as e:
        error(str(e), label="config error:")
        return None


def run(args: argparse.Namespace) -> int:
    console = wide_console()
    loaded = config_and_problems(console, args)
    if loaded is None:
        return 2
    cfg, problems = loaded
    suite_names = sorted({r.suite for r in problem_refs(cfg)}) or [cfg.suite]
    devices = sorted(set(target_devices(cfg, [p.name for p in problems]).values()))
    console.print(
        f"optimizing {len(problems)} problem(s) of suite{'s' if len(suite_names) > 1 else ''} "
        f"[bold]{', '.join(suite_names)}[/bold] on {', '.join(devices)}: preset {args.preset}, "
        f"B={cfg.search.beam_width} N={cfg.search.plans_per_candidate} K={cfg.search.samples_per_plan} "
        f"T={cfg.search.iterations}, model {cfg.llm.for_role('planner').model}"
    )
    return execute(console, cfg, problems, args)


def preflight(console: Console, cfg: RunConfig, probe: bool) -> bool:
    """Check that every role can reach its model (`actors/llm/preflight.py`); False (after one line
    per problem saying what to set) if not. `probe`: also make one tiny real call per model."""
    import asyncio

    from actors.llm.pricing import (
        FREE_PROVIDERS,
        UnpricedModelError,
        price_snapshot,
        provider_of,
        role_models,
    )

    if all(provider_of(m) in FREE_PROVIDERS for m in role_models(cfg.llm)):
        return True  # offline models only (checked without importing litellm, seconds of start-up)
    from actors.llm import preflight as pf

    if not pf.needs_preflight(cfg.llm):
        return True
    problems = pf.check_models(cfg.llm)
    if not problems:
        try:
            price_snapshot(cfg.llm)
        except UnpricedModelError as e:
            problems = [str(e)]
    if not problems and probe:
        probes = asyncio.run(pf.probe_models(cfg.llm))
        problems = [text for text in map(pf.probe_problem, probes) if text]
        for p in probes:
            if p.error is None:
                console.print(f"preflight: {p.use.label} answered in {p.latency_s:.2f}s")
    for text in problems:
        error(text, label="preflight failed:")
    return not problems


def execute(
    console: Console, cfg: RunConfig, problems: list, args: argparse.Namespace, **session_kwargs
) -> int:
    """Run a session with progress bars and print its outcome (shared by run, ablate, resume)."""
    from actors.runtime.session import RunError, RunTimedOut, SessionOptions, run_session
    from cli.commands._progress import RunProgress
    from replay.runstate import RunBusy

    if not preflight(console, cfg, getattr(args, "preflight", True)):
        return 2
    budget = cfg.llm.budget_usd
    console.print(
        f"LLM budget: {f'${budget:.2f}' if budget is not None else 'none'} "
        "(llm.budget_usd; --budget USD to change)"
    )
    where = {"nats_url": args.nats, "ray_address": args.ray_address}
    if not args.nats and not args.ray_address:
        pooled = pool_kwargs(console, cfg, problems, session_kwargs.get("devices"))
        if pooled is None:
            return 2
        where.update(pooled)
    try:
        with RunProgress(console, cfg.search.iterations) as progress:
            outcome = run_session(
                cfg,
                problems,
                SessionOptions(
                    on_event=progress.on_event,
                    timeout_s=getattr(args, "timeout", None),
                    log_level=args.log_level,
                    on_warning=lambda text: console.print(f"[yellow]waiting:[/yellow] {text}"),
                    **where,
                    **session_kwargs,
                ),
            )
    except RunTimedOut as e:
        return error(str(e), 1)
    except (RunError, ConfigError, RunBusy) as e:
        return error(str(e), 1, label="run failed:")
    except Exception as e:
        pricing = sys.modules.get("actors.llm.pricing")  # loaded if the run got far enough to raise this
        if pricing is not None and isinstance(e, pricing.UnpricedModelError):
            return error(str(e))
        raise
    return report_outcome(console, cfg, args, outcome)


def report_outcome(console: Console, cfg: RunConfig, args: argparse.Namespace, outcome: RunOutcome) -> int:
    """Print a finished session's outcome (results, what was served from a recording, cost,
    failures) and return the command's exit code."""
    from cli.commands._progress import results_table

    view = outcome.view
    for w in outcome.warnings:
        console.print(f"[yellow]warning:[/yellow] {w}")
    from replay.states import DRIVEN, run_state, time_up

    state = time_up() if outcome.timed_out else run_state(view.status, DRIVEN)  # as `accelopt runs` says
    console.print(results_table(view, f"run {outcome.run_id}: {state.label}"))
    if view.started is not None and view.started.parent_run:
        from events.logfile import read_events
        from replay.recording import served_counts

        s = served_counts(read_events(outcome.run_dir / "log.aolog"))
        console.print(
            f"served from the recording of {view.started.parent_run}: {s.llm_served} of {s.llm_calls} "
            f"LLM calls ({s.llm_calls - s.llm_served} made anew), {s.profiles_served} of {s.profiles} "
            f"profiles" + (f" (+{s.remeasures} re-measure profiles, timed anew)" if s.remeasures else "")
        )
    console.print(f"LLM cost ${view.cost_usd:.4f} · log, best kernels and results in {outcome.run_dir}")
    failed = {role: u.failed_calls for role, u in sorted(view.usage.items()) if u.failed_calls}
    if failed:
        calls = {role: u.calls for role, u in view.usage.items()}
        console.print(
            "[yellow]failed LLM calls:[/yellow] "
            + ", ".join(f"{role} {n} of {calls[role]}" for role, n in failed.items())
            + " (the errors: accelopt report "
            f"{outcome.run_id})",
            soft_wrap=True,
        )
    if view.budget is not None:
        console.print(budget_note(view), soft_wrap=True)
    if view.failed is not None:
        error(f"{view.failed.reason}: {view.failed.detail}", 1, label="run failed:")
    nothing = nothing_optimized(view)
    if nothing:
        return error(nothing, 1, label="nothing was optimized:")
    if outcome.timed_out:
        from replay.runstate import run_resume_command
        from replay.states import TIME_UP

        return error(
            f"timed out after {args.timeout:g} s: the run is stopped ({TIME_UP}); to go on: "
            f"{run_resume_command(outcome.run_id, cfg.root)}",
            1,
        )
    return 0 if view.completed else 1


def nothing_optimized(view) -> str | None:
    """Why a run that ended had nothing to optimize (no problem's baseline could be profiled),
    or None: such a run is not reported as a success."""
    failed = {}
    for name, p in view.problems.items():
        k = view.kernels.get(p.baseline_id or "")
        if k is None or k.status in ("passed", "unmeasured"):
            return None
        failed[name] = k.status
    if not failed:
        return None
    return (
        "the baseline of every problem failed ("
        + ", ".join(f"{n}: {st}" for n, st in sorted(failed.items()))
        + "); the table's note and `accelopt report` say why"
    )


def root_flag(cfg: RunConfig) -> str:
    """` --root R` for a command to print, where the run's root is not the default."""
    from replay.runstate import root_flag as flag

    return flag(cfg.root)


def pool_kwargs(console: Console, cfg: RunConfig, problems: list, devices: list[str] | None) -> dict | None:
    """How a run reaches a warm pool of its root (`accelopt up`): {} without one, None (after
    saying why) where one is up that cannot serve this run: its agents would serve the run's
    requests on the shared log with settings that are not the run's."""
    from actors.runtime.pool import attach_check

    devices = devices or sorted(set(target_devices(cfg, [p.name for p in problems]).values()))
    pool, why = attach_check(cfg, devices)
    if why:
        error(
            f"a pool of agents is up for {cfg.root} that cannot serve this run: {why}. Stop it "
            f"(accelopt down --root {cfg.root}) or use another --root"
        )
        return None
    if pool is None:
        return {}
    console.print(f"attached to the agent pool of {cfg.root} (pid {pool.pid})", highlight=False)
    return {"nats_url": pool.nats_url, "start_workers": False, "coordinator": "local"}


def budget_note(view) -> str:
    """What a run that stopped on its budget says: spent, and how to go on."""
    b = view.budget
    done = min(
        (max((i.iteration for i in p.iterations), default=0) for p in view.problems.values()), default=0
    )
    return (
        f"[yellow]stopped on the LLM budget:[/yellow] spent ${b.spent_usd:.4f} of ${b.budget_usd:.2f}. To go on "
        f"with a larger budget: accelopt ablate {view.run_id} --from-iteration {done} "
        f"--set llm.budget_usd={max(2 * b.budget_usd, 1.0):g} (iterations up to {done} are served from this "
        "run's recording at no cost)"
    )
