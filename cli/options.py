"""The flags several commands share, one wording each, and the run config they build.

A command adds them here (`add_config_args`, `add_set_arg`, `add_preflight_arg`, the `*_HELP`
texts) rather than writing its own copy, so `--root` or `--set` reads the same everywhere."""

from __future__ import annotations

import argparse

from rich.console import Console

from accelopt.config import PRESETS, ConfigError, RunConfig, build_config
from cli.errors import error

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

    def what(name: str) -> str:
        d = PRESETS[name]
        s = d.get("search", {})
        text = (
            f"B={s.get('beam_width')} N={s.get('plans_per_candidate')} K={s.get('samples_per_plan')} "
            f"T={s.get('iterations')}"
        )
        return text + "".join(f", {k} {d[k]}" for k in ("suite", "device") if k in d)

    return "search preset (default quick): " + "; ".join(f"{n} ({what(n)})" for n in PRESETS)


def add_set_arg(p: argparse.ArgumentParser, help: str = SET_HELP) -> None:
    """`--set KEY=VALUE` (repeatable) into `args.overrides`; `help` says which keys apply."""
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE", help=help)


def add_config_args(p: argparse.ArgumentParser) -> None:
    """Flags shared by run-like commands (run, demo, up)."""
    p.add_argument("--preset", choices=list(PRESETS), default=DEFAULT_PRESET, help=preset_help())
    p.add_argument("--config", help="YAML config file (applied over the preset; --set over both)")
    add_set_arg(p)
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


def add_preflight_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--preflight",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="before starting, make one tiny real call per model and report its latency (default on; "
        "keys, providers and api_base are always checked)",
    )


def config_from_args(args: argparse.Namespace) -> RunConfig:
    """The run config the flags of `add_config_args` (and a command's --suite, --problems,
    --device) ask for: the preset, the file, then every flag as a `--set` override."""
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
