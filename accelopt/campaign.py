"""The campaign file (YAML): what a campaign optimizes, on which devices, with what, until when.

A campaign (docs/campaigns.md) is many runs of one problem each, scheduled by
`accelopt/campaign_core.py`; this module holds its settings and the one function that makes a
scheduled run's `RunConfig` from them (`run_overrides`), so the driver, a resume and a
reader of the log build the same config. Unknown keys and bad values fail with an error
naming the key, as a run config does (`accelopt/config.py`).

    name: nightly
    model: builtin/tuner               # every role's model (a device may name its own)
    problems:
      - {suite: cpu_v2, device: cpu}    # every problem of a suite (device: the suite's own)
      - {suite: nki_tune, device: trn1, problems: [silu]}
      - cpu_v2/bmm@cpu                  # one problem: SUITE/PROBLEM[@DEVICE]
    devices:
      cpu:  {profilers: 1, preset: quick, set: [search.iterations=2]}
      trn1: {profilers: 1}
      h100: {profilers: 0}              # served by a fleet's `accelopt worker`s, if any
    budget: {total_usd: 20, daily_usd: 5}
    stop: {target_pct_peak: 0.8, plateau_runs: 3, min_gain: 0.02, max_hours: 48}
    scheduler: {policy: expected_gain_v4}
    set: [profiling.timeout_s=120]      # every run's config, as `accelopt run --set`
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import msgspec

from accelopt.config import (
    PRESETS,
    ConfigError,
    MemoryConfig,
    RunConfig,
    build_config,
    convert,
    parse_override,
    read_mapping,
)
from accelopt.problem import Problem, SourceFile


class _C(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    pass


class SuiteEntry(_C):
    """Problems of one suite on one device kind (`device`: the suite's own when not given;
    `problems`: every problem of the suite when empty)."""

    suite: str
    device: str | None = None
    problems: list[str] = []


class DeviceSpec(_C):
    """How a device kind is worked on. `profilers`: profiler actors the campaign starts for it
    (0: it relies on workers a fleet started with `accelopt worker`, and is parked when none
    serves it); `runs_at_once`: runs on it at the same time (default: its profilers, at least
    1); `preset` and `set`: the search of its runs; `model`: its runs' model."""

    profilers: int = 1
    runs_at_once: int | None = None
    preset: str = "quick"
    set: list[str] = []
    model: str | None = None

    @property
    def slots(self) -> int:
        return self.runs_at_once if self.runs_at_once is not None else max(1, self.profilers)


class BudgetSpec(_C):
    """LLM dollars: the campaign's in total and per UTC day (a run's spend counts on the day it
    was scheduled). `max_call_usd`: the most one call may cost (default: the priciest call seen
    so far, or before any, a bound from the models' prices and output allowance)."""

    total_usd: float | None = None
    daily_usd: float | None = None
    max_call_usd: float | None = None


class StopSpec(_C):
    """When an item is done (`target_pct_peak` reached; `plateau_runs` runs in a row each
    gaining less than `min_gain`) and when the campaign is (`max_runs`, `max_hours`)."""

    target_pct_peak: float | None = None
    plateau_runs: int = 3
    min_gain: float = 0.02
    max_runs: int | None = None
    max_hours: float | None = None


class SchedulerSpec(_C):
    """The policy that ranks a device's items (`accelopt/campaign_policy.py`: `expected_gain_v4`,
    `round_robin`; `expected_gain` to `expected_gain_v3`, earlier versions, for campaigns logged
    with them) and the expected log-speedup of a run of an item nothing is known of yet."""

    policy: str = "expected_gain_v4"
    prior_gain: float = 0.2


class CampaignSpec(_C):
    name: str = "campaign"
    seed: int = 0
    model: str = "builtin/tuner"
    problems: list[str | SuiteEntry] = []
    devices: dict[str, DeviceSpec] = {}
    budget: BudgetSpec = msgspec.field(default_factory=BudgetSpec)
    stop: StopSpec = msgspec.field(default_factory=StopSpec)
    scheduler: SchedulerSpec = msgspec.field(default_factory=SchedulerSpec)
    set: list[str] = []  # every run's config (`accelopt run --set KEY=VALUE`)
    memory: str | None = None  # the memory URI (default: the runs root's, shared by its runs)
    # a run whose requests wait this long with no worker serving them fails, and the device
    # is parked (reported, not waited on)
    unserved_fail_after_s: float = 120.0

    def device(self, kind: str) -> DeviceSpec:
        return self.devices.get(kind) or DeviceSpec()

    def to_dict(self) -> dict[str, Any]:
        return msgspec.to_builtins(self)


class ProblemSpec(msgspec.Struct, frozen=True):
    """One `problems` entry, parsed: a suite's problems (`name` None: all) on `device` (None:
    the suite's own)."""

    suite: str
    name: str | None
    device: str | None


def problem_specs(spec: CampaignSpec) -> list[ProblemSpec]:
    out = []
    for i, p in enumerate(spec.problems):
        if isinstance(p, SuiteEntry):
            names: list[str | None] = list(p.problems) or [None]
            out += [ProblemSpec(p.suite, n, p.device) for n in names]
            continue
        head, at, device = p.rpartition("@")
        if not at:
            head, device = p, ""
        suite, slash, name = head.rpartition("/")
        if not slash or not suite or not name or (at and not device):
            raise ConfigError(
                f"problems[{i}]: {p!r}: expected SUITE/PROBLEM or SUITE/PROBLEM@DEVICE (a whole suite: "
                "{suite: NAME, device: KIND})"
            )
        out.append(ProblemSpec(suite, name, device or None))
    return out


def load_spec(path: str | Path) -> CampaignSpec:
    """The campaign file at `path`, every key checked (errors: one line naming the file and the
    key, and for YAML syntax the line). The device kinds it names are checked where the
    device families are known: `actors.runtime.campaign.prepare`."""
    return spec_from_dict(read_mapping(path), source=str(path))


def spec_from_dict(data: dict[str, Any], source: str = "campaign") -> CampaignSpec:
    spec = convert(data, CampaignSpec, source)
    validate(spec, source)
    return spec


def validate(spec: CampaignSpec, source: str = "campaign") -> None:
    from accelopt.campaign_policy import POLICIES

    def bad(key: str, why: str) -> ConfigError:
        return ConfigError(f"{source}: {key}: {why}")

    if not spec.problems:
        raise bad("problems", "name at least one problem or suite")
    problem_specs(spec)
    for kind, d in spec.devices.items():
        if d.profilers < 0:
            raise bad(f"devices.{kind}.profilers", "must be >= 0")
        if d.runs_at_once is not None and d.runs_at_once < 1:
            raise bad(f"devices.{kind}.runs_at_once", "must be >= 1")
        if d.preset not in PRESETS:
            raise bad(
                f"devices.{kind}.preset", f"unknown preset {d.preset!r}; choose from {', '.join(PRESETS)}"
            )
        for item in d.set:
            parse_override(item)
    for item in spec.set:
        parse_override(item)
    b = spec.budget
    for key, value in (
        ("total_usd", b.total_usd),
        ("daily_usd", b.daily_usd),
        ("max_call_usd", b.max_call_usd),
    ):
        if value is not None and (value < 0 or not math.isfinite(value)):
            raise bad(f"budget.{key}", "must be >= 0")
    s = spec.stop
    if s.target_pct_peak is not None and not 0 < s.target_pct_peak <= 1:
        raise bad("stop.target_pct_peak", "a fraction of peak, in (0, 1]")
    if s.plateau_runs < 1:
        raise bad("stop.plateau_runs", "must be >= 1")
    if s.min_gain < 0:
        raise bad("stop.min_gain", "must be >= 0")
    if s.max_runs is not None and s.max_runs < 1:
        raise bad("stop.max_runs", "must be >= 1")
    if s.max_hours is not None and s.max_hours <= 0:
        raise bad("stop.max_hours", "must be > 0")
    if spec.scheduler.policy not in POLICIES:
        raise bad(
            "scheduler.policy", f"unknown policy {spec.scheduler.policy!r}; choose from {', '.join(POLICIES)}"
        )
    if spec.unserved_fail_after_s <= 0:
        raise bad("unserved_fail_after_s", "must be > 0")


# --- the configs of the campaign's runs and of its agents ------------------------------------


def agent_overrides(spec: CampaignSpec, devices: list[str], root: str, memory_uri: str) -> list[str]:
    """What every config of the campaign shares: its runs' and the one its agents start with
    (so the agents behave as each run's own would: `actors/runtime/pool.py`)."""
    out = [*spec.set, f"root={root}", f"memory.uri={memory_uri}", f"llm.default.model={spec.model}"]
    out += [f"devices.{d}.workers={spec.device(d).profilers}" for d in sorted(devices)]
    # a campaign never waits on a device nobody serves: the run fails, the device is parked
    out.append(f"workers.unserved_fail_after_s={spec.unserved_fail_after_s}")
    return out


def run_overrides(
    spec: CampaignSpec,
    devices: list[str],
    root: str,
    memory_uri: str,
    scheduled: Any,  # catalog.CampaignRunScheduled
    problem_ref: str,
) -> tuple[str, list[str]]:
    """(preset, overrides) of a scheduled run's config: the campaign's shared settings, its
    device's search, and the run's own problem, seed and budget."""
    d = spec.device(scheduled.device)
    out = [*agent_overrides(spec, devices, root, memory_uri), *d.set]
    if d.model:
        out.append(f"llm.default.model={d.model}")
    out += [f"problems=[{problem_ref}]", f"seed={scheduled.seed}"]
    out.append(f"llm.budget_usd={'null' if scheduled.budget_usd is None else scheduled.budget_usd}")
    if scheduled.llm_inflight is not None:
        out.append(f"limits.llm_inflight_per_role={scheduled.llm_inflight}")
    return d.preset, out


def run_config(
    spec: CampaignSpec, devices: list[str], root: str, memory_uri: str, scheduled: Any, problem_ref: str
) -> RunConfig:
    preset, overrides = run_overrides(spec, devices, root, memory_uri, scheduled, problem_ref)
    return build_config(preset=preset, overrides=overrides)


def agent_config(spec: CampaignSpec, devices: list[str], root: str, memory_uri: str) -> RunConfig:
    return build_config(preset="quick", overrides=agent_overrides(spec, devices, root, memory_uri))


class _Trial(msgspec.Struct, frozen=True):
    device: str
    seed: int = 0
    budget_usd: float | None = 1.0
    llm_inflight: int | None = 1


def check_configs(spec: CampaignSpec, devices: list[str], root: str, memory_uri: str) -> None:
    """Build the agents' config and a run config per device kind: a bad `set` entry or model
    is a ConfigError naming its key before the campaign starts, not at its first run."""
    try:
        agent_config(spec, devices, root, memory_uri)
    except ConfigError as e:
        raise ConfigError(f"set: {str(e).removeprefix('config: ')}") from e
    for d in devices:
        try:
            run_config(spec, devices, root, memory_uri, _Trial(device=d), f"suite/problem@{d}")
        except ConfigError as e:
            raise ConfigError(f"devices.{d}: {str(e).removeprefix('config: ')}") from e


def run_memory(
    spec: CampaignSpec, devices: list[str], root: str, memory_uri: str, device: str
) -> MemoryConfig:
    """The memory settings of the campaign's runs on `device`: what their planners retrieve with."""
    return run_config(
        spec, devices, root, memory_uri, _Trial(device=device), f"suite/problem@{device}"
    ).memory


def with_start_kernel(problem: Problem, source: str) -> Problem:
    """`problem` with its baseline's entry file replaced by `source`: a run of the campaign
    starts from the best kernel its item has so far (the other files of a multi-file
    baseline stay as they are)."""
    base = problem.baseline
    entry = base.entry_file()
    sources = [SourceFile(path=f.path, content=source) if f is entry else f for f in base.sources]
    return msgspec.structs.replace(problem, baseline=msgspec.structs.replace(base, sources=sources))


def floor_cents(usd: float) -> float:
    """`usd` rounded down to the cent (a budget handed out never exceeds what is left)."""
    return math.floor(round(usd * 100, 6)) / 100
