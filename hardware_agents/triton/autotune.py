"""`@triton.autotune` kernels in the interpreter: every config checked, not only the first.

Under TRITON_INTERPRET there is no GPU to benchmark configs on (Triton's benchmarker needs a
driver), so the harness decides which config runs: `install()` replaces the tuner's benchmark
by a ranking that puts the *forced* config first (config 0 unless `force(k)`), and forgets the
tuner's cached choice at every call so that the forced config is the one launched. Every
tuner that runs is recorded (`tuners()`), with the config it launched (`launched()`).

The interpreter ignores `num_warps`, `num_stages` and `num_ctas`, so configs that differ only
in those run the same code there: a tuner's configs are grouped by their meta-parameters
(`kwargs`), and index k means the first config of its k-th group. The harness runs the
correctness cases with group 0, then (`sweep_count() > 1`) runs its sweep case again once per
further index k (group k of every tuner, or its last one where a tuner has fewer): on a GPU
the tuner may pick any config, so a kernel that is wrong for one of them is wrong there
whenever the tuner picks it, and the judge names those configs (`describe`). Configs a
tuner's `prune_configs_by` removes are never picked by it: the ranking applies to the
configs it keeps.
"""

from __future__ import annotations

from typing import Any

import triton.runtime.autotuner as _at

_FORCED = [0]
_TUNERS: list[Any] = []  # every Autotuner that ran, in the order of its first run
_LAUNCHED: dict[int, Any] = {}  # id(tuner) -> the config it launched last


def describe(config: Any) -> str:
    """A config as `BLOCK_M=64 (launch: num_warps=4, num_stages=2)`: its meta-parameters, then
    its launch options."""
    meta = ", ".join(f"{k}={v}" for k, v in getattr(config, "kwargs", {}).items())
    launch = ", ".join(
        f"{opt}={getattr(config, opt)}"
        for opt in ("num_warps", "num_stages", "num_ctas", "maxnreg")
        if getattr(config, opt, None) is not None
    )
    return f"{meta or 'no meta-parameters'}" + (f" (launch: {launch})" if launch else "")


def tuner_name(tuner: Any) -> str:
    fn = getattr(tuner, "base_fn", None) or getattr(tuner, "fn", None)
    return str(getattr(fn, "__name__", type(tuner).__name__))


def _key(config: Any) -> tuple[tuple[str, str], ...]:
    return tuple(sorted((k, repr(v)) for k, v in getattr(config, "kwargs", {}).items()))


def groups(tuner: Any) -> list[list[Any]]:
    """The tuner's configs grouped by their meta-parameters, in the order they first appear."""
    out: dict[tuple[tuple[str, str], ...], list[Any]] = {}
    for c in tuner.configs:
        out.setdefault(_key(c), []).append(c)
    return list(out.values())


def install() -> None:
    """Rank configs by the forced group and forget cached choices (see the module doc)."""

    def _bench(self: Any, *args: Any, config: Any, **meta: Any) -> list[float]:
        gs = groups(self)
        forced = gs[min(_FORCED[0], len(gs) - 1)][0]
        index = self.configs.index(config) if config in self.configs else len(self.configs)
        rank = 0.0 if config is forced else 1.0 + index
        return [rank, rank, rank]

    original_run = _at.Autotuner.run
    if getattr(original_run, "_accelopt_sweep", False):
        _at.Autotuner._bench = _bench
        return

    def run(self: Any, *args: Any, **kwargs: Any) -> Any:
        if not any(t is self for t in _TUNERS):
            _TUNERS.append(self)
        self.cache = {}  # the forced config, every call
        try:
            return original_run(self, *args, **kwargs)
        finally:
            _LAUNCHED[id(self)] = getattr(self, "best_config", None)

    run._accelopt_sweep = True  # type: ignore[attr-defined]
    _at.Autotuner._bench = _bench
    _at.Autotuner.run = run


def force(k: int) -> None:
    _FORCED[0] = k


def tuners() -> list[Any]:
    return list(_TUNERS)


def sweep_count() -> int:
    """How many config groups a sweep runs: the most any tuner that ran has."""
    return max((len(groups(t)) for t in _TUNERS), default=0)


def launched() -> dict[str, str]:
    """{kernel: configs} of what each tuner launched last: the config, and the others of its
    group (the same code in the interpreter)."""
    out = {}
    for t in _TUNERS:
        cfg = _LAUNCHED.get(id(t))
        if cfg is None:
            continue
        same = next((g for g in groups(t) if any(c is cfg for c in g)), [cfg])
        index = next((i for i, c in enumerate(t.configs) if c is cfg), -1)
        text = f"configs[{index}] {describe(cfg)}"
        if len(same) > 1:
            text += f" (and {len(same) - 1} config(s) differing only in num_warps/num_stages)"
        out[tuner_name(t)] = text
    return out


__all__ = ["describe", "force", "install", "launched", "sweep_count", "tuner_name", "tuners"]
