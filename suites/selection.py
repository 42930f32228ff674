"""The problems a run config names, loaded and checked (`accelopt run`, `demo`, benchmarks)."""

from __future__ import annotations

from collections.abc import Callable

from accelopt.config import ConfigError, RunConfig, problem_refs
from accelopt.problem import Problem, ProblemFileError


def load_problems(cfg: RunConfig, *, on_warning: Callable[[str], None] | None = None) -> list[Problem]:
    """The run's problems (every problem of `suite` when `problems` is empty), checked: each
    reference's suite and problem exist, its device kind has a device family, the family does
    not refuse the run, the run's agent options are its agent's, and that agent runs the
    problem's kernel language. Each problem's device is `target_devices(cfg, names)`.

    A problem folder of a named suite that cannot be read is an error when the run asks for
    it (or for the whole suite) and a warning (`on_warning`, else the log) when it does not."""
    import suites

    refs = problem_refs(cfg)
    uses = [(f"problem {raw!r}", ref.device) for raw, ref in zip(cfg.problems, refs, strict=True)]
    check_devices(cfg, uses or [("device", cfg.device)])
    catalog = _Catalog(suites)
    if not refs:
        broken = catalog.load(cfg.suite, what=None)
        if broken:
            raise ConfigError(
                f"suite {cfg.suite!r}: {'; '.join(broken.values())} (fix the folder, or name the "
                "problems to run with --problems)"
            )
        problems = list(catalog.loaded[cfg.suite].values())
        for p in problems:
            check_language(f"suite {cfg.suite!r}", p, cfg.device)
        return problems
    problems, missing, asked = [], [], {(ref.suite, ref.name) for ref in refs}
    for raw, ref in zip(cfg.problems, refs, strict=True):
        broken = catalog.load(ref.suite, what=f"problem {raw!r}")
        by_name = catalog.loaded[ref.suite]
        if ref.name in broken:
            raise ConfigError(f"problem {raw!r}: {broken[ref.name]}")
        if ref.name in by_name:
            problems.append(by_name[ref.name])
            check_language(f"problem {raw!r}", by_name[ref.name], ref.device)
        elif "/" in raw:
            raise ConfigError(
                f"problem {raw!r}: suite {ref.suite!r} has no problem {ref.name!r}; "
                f"available: {', '.join(sorted([*by_name, *broken]))}"
            )
        else:
            missing.append(ref.name)
    if missing:
        names = sorted([*catalog.loaded[cfg.suite], *catalog.broken[cfg.suite]])
        raise ConfigError(
            f"problems not in suite {cfg.suite!r}: {', '.join(missing)}; available: {', '.join(names)}"
        )
    warn = on_warning or _log_warning
    for suite, broken in sorted(catalog.broken.items()):
        for name, why in sorted(broken.items()):
            if (suite, name) not in asked:
                warn(f"suite {suite!r}: problem {name!r} skipped, its folder cannot be read: {why}")
    return problems


def check_devices(cfg: RunConfig, uses: list[tuple[str, str]]) -> None:
    """ConfigError unless every device kind of `uses` ((what uses it, kind)) has a family, no
    family refuses the run, and the run's agent options (`devices.<kind>.options`) are the
    options of each kind's agent, with values of their types."""
    from hardware_agents.families import family_of, run_refusal

    check_kinds(
        [
            *uses,
            *((f"devices.{kind}", kind) for kind in cfg.devices),
            *((f"profiling.device_timeout_s.{kind}", kind) for kind in cfg.profiling.device_timeout_s),
        ]
    )
    options = {kind: d.options for kind, d in cfg.devices.items()}
    why = run_refusal([device for _, device in uses], options)
    if why:
        raise ConfigError(why)
    errors = [
        error
        for kind in dict.fromkeys(device for _, device in uses)
        for family in [family_of(kind)]
        if family is not None
        for error in family.option_errors(kind, options.get(kind) or {})
    ]
    if errors:
        raise ConfigError("; ".join(errors))


def check_kinds(uses: list[tuple[str, str]]) -> None:
    """ConfigError unless a device family serves every kind of `uses` ((what names it, kind)):
    the error names the first that none serves, and the kinds there are."""
    from hardware_agents.families import family_of, unknown_kind

    for what, kind in uses:
        if family_of(kind) is None:
            raise ConfigError(f"{what}: {unknown_kind(kind)}")


class _Catalog:
    """The problems of each suite a run names, loaded once; the folders that could not be read
    kept apart with why (`broken`)."""

    def __init__(self, suites_pkg) -> None:
        self.suites = suites_pkg
        self.loaded: dict[str, dict[str, Problem]] = {}
        self.broken: dict[str, dict[str, str]] = {}

    def load(self, suite: str, *, what: str | None) -> dict[str, str]:
        """Load `suite` (once); its broken problems, name -> why. `what` names the reference
        that asked for it, in the error for a suite that does not exist."""
        prefix = f"{what}: " if what else ""
        if suite not in self.loaded:
            s = self.suites
            try:
                info, names = s.suite_info(suite), s.problem_names(suite)
            except KeyError:
                raise ConfigError(
                    f"{prefix}no suite named {suite!r}; suites: {', '.join(s.list_suites())}"
                ) from None
            except ProblemFileError as e:
                raise ConfigError(f"{prefix}{e}") from e
            folder = s.suite_dir(suite)
            loaded, broken = {}, {}
            for name in names:
                try:
                    problem = s.load_problem_dir(folder / name, info)
                except (ProblemFileError, OSError) as e:
                    broken[name] = str(e)
                    continue
                loaded[problem.name] = problem
            self.loaded[suite], self.broken[suite] = loaded, broken
        return self.broken[suite]


def check_language(what: str, problem: Problem, device: str) -> None:
    """Refuse a problem whose kernel language the agent of `device` does not run, naming the
    devices that do."""
    from hardware_agents.families import agent_languages, registered_kinds

    language = problem.baseline.spec.language
    runs = agent_languages(device)
    if runs is None or language in runs:
        return
    able = [k for k in registered_kinds() if language in (agent_languages(k) or ())]
    where = (
        f"devices that run {language}: {', '.join(able)}" if able else f"no registered device runs {language}"
    )
    raise ConfigError(
        f"{what} is written in {language}, which device {device!r} cannot run (it runs "
        f"{', '.join(runs)}); {where}"
    )


def _log_warning(text: str) -> None:
    from accelopt.logging import get_logger

    get_logger(component="suites").warning(text)
