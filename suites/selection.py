"""The problems a run config names, loaded and checked (`accelopt run`, `demo`, benchmarks)."""

from __future__ import annotations

from accelopt.config import ConfigError, RunConfig, problem_refs
from accelopt.problem import Problem


def load_problems(cfg: RunConfig) -> list[Problem]:
    """The run's problems (every problem of `suite` when `problems` is empty), checked: each
    reference's suite and problem exist and its device kind has a hardware agent. Each
    problem's device is `target_devices(cfg, names)`."""
    import suites
    from hardware_agents.base import registered_kinds
    from hardware_agents.sim.gate import run_refusal

    refs = problem_refs(cfg)
    loaded: dict[str, dict] = {}

    def suite_problems(suite: str, ref: str) -> dict:
        if suite not in loaded:
            try:
                loaded[suite] = {p.name: p for p in suites.load_suite(suite)}
            except KeyError as e:
                raise ConfigError(f"problem {ref!r}: {e.args[0] if e.args else e}") from e
        return loaded[suite]

    kinds = registered_kinds()
    uses = [(f"problem {raw!r}", ref.device) for raw, ref in zip(cfg.problems, refs, strict=True)]
    for what, device in uses or [("device", cfg.device)]:
        if device not in kinds:
            from accelopt.plugins import DEVICE_GROUP, describe_failures

            raise ConfigError(f"{what}: unknown device kind {device!r}; known: {', '.join(kinds)}"
                              f"{describe_failures(DEVICE_GROUP)}")
    sim_why = run_refusal(cfg, [device for _, device in uses] or [cfg.device])
    if sim_why:
        raise ConfigError(sim_why)
    if not refs:
        return list(suite_problems(cfg.suite, cfg.suite).values())
    problems, missing = [], []
    for raw, ref in zip(cfg.problems, refs, strict=True):
        by_name = suite_problems(ref.suite, raw)
        if ref.name in by_name:
            problems.append(by_name[ref.name])
        elif "/" in raw:
            raise ConfigError(f"problem {raw!r}: suite {ref.suite!r} has no problem {ref.name!r}; "
                              f"available: {', '.join(sorted(by_name))}")
        else:
            missing.append(ref.name)
    if missing:
        raise ConfigError(f"problems not in suite {cfg.suite!r}: {', '.join(missing)}; "
                          f"available: {', '.join(sorted(loaded[cfg.suite]))}")
    return problems
