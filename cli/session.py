"""A run session driven from the command line (run, ablate, resume, demo): the pre-run check
of the models, the progress bars while it runs, and its outcome printed as an exit code."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING, Any

from rich.console import Console

from accelopt.config import ConfigError, RunConfig, target_devices
from cli.errors import error

if TYPE_CHECKING:
    from actors.runtime.session import RunOutcome
    from replay.fold import RunView


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


def session_with_progress(
    console: Console, cfg: RunConfig, problems: list, args: argparse.Namespace, **options: Any
) -> RunOutcome:
    """`run_session` with a progress bar per problem and its waits said as warnings;
    `options` are the rest of its `SessionOptions`."""
    from actors.runtime.session import SessionOptions, run_session
    from cli.progress import RunProgress

    with RunProgress(console, cfg.search.iterations) as progress:
        return run_session(
            cfg,
            problems,
            SessionOptions(
                on_event=progress.on_event,
                log_level=args.log_level,
                on_warning=lambda text: console.print(f"[yellow]waiting:[/yellow] {text}"),
                **options,
            ),
        )


def execute(
    console: Console, cfg: RunConfig, problems: list, args: argparse.Namespace, **session_kwargs: Any
) -> int:
    """Run a session with progress bars and print its outcome (shared by run, ablate, resume)."""
    from actors.runtime.session import RunError, RunTimedOut
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
        outcome = session_with_progress(
            console, cfg, problems, args, timeout_s=getattr(args, "timeout", None), **where, **session_kwargs
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
    from cli.progress import results_table

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


def nothing_optimized(view: RunView) -> str | None:
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


def budget_note(view: RunView) -> str:
    """What a run that stopped on its budget says: spent, and how to go on."""
    b = view.budget
    assert b is not None
    done = min(
        (max((i.iteration for i in p.iterations), default=0) for p in view.problems.values()), default=0
    )
    return (
        f"[yellow]stopped on the LLM budget:[/yellow] spent ${b.spent_usd:.4f} of ${b.budget_usd:.2f}. To go on "
        f"with a larger budget: accelopt ablate {view.run_id} --from-iteration {done} "
        f"--set llm.budget_usd={max(2 * b.budget_usd, 1.0):g} (iterations up to {done} are served from this "
        "run's recording at no cost)"
    )
