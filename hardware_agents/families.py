"""The device families AccelOpt knows, and the lookups every layer above asks.

`FAMILIES` is the explicit list of the built-in families (one descriptor each,
`hardware_agents/<family>/family.py`, see `hardware_agents/family.py`); a package installed
beside AccelOpt adds its own with `register_family` from its `accelopt.devices` entry point
(`accelopt/plugins.py`), loaded the first time a lookup needs the whole list or misses a
name. The command line, the language lookups (`hardware_agents/languages`), the session, the
suites, the profiler actor, Ray placement and the memory's retrieval ask here for a kind's
family and read its descriptor; none of them imports a family's modules.

    get_agent("cpu")                 # the agent of a kind, made by its family
    family_of("h100").slots          # what a profiler of h100 holds
    registered_kinds(), available_devices()
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any, TypeVar

from hardware_agents.base import HardwareAgent
from hardware_agents.cpu.family import FAMILY as CPU
from hardware_agents.family import DeviceFamily, SlotError
from hardware_agents.kernel_language import KernelLanguage
from hardware_agents.neuron.family import FAMILY as NEURON
from hardware_agents.sim.family import FAMILY as SIM
from hardware_agents.triton.family import FAMILY as TRITON

if TYPE_CHECKING:
    from accelopt.config import ProfilingConfig

__all__ = [
    "FAMILIES",
    "SlotError",
    "agent_languages",
    "available_devices",
    "device_slot",
    "family_of",
    "get_agent",
    "get_family",
    "kinds_running",
    "language_named",
    "list_families",
    "profile_timeout_s",
    "register_family",
    "registered_kinds",
    "registered_languages",
    "run_refusal",
    "runtime_reason",
    "unknown_kind",
]

FAMILIES: tuple[DeviceFamily, ...] = (CPU, TRITON, NEURON, SIM)
"""The built-in families, in the order their languages' tuner syntaxes are tried."""


class _Index:
    """The registered families and what they serve, replaced as a whole on registration."""

    def __init__(self, families: Iterable[DeviceFamily] = ()) -> None:
        self.families: dict[str, DeviceFamily] = {f.name: f for f in families}
        self.by_kind = {kind: f for f in self.families.values() for kind in f.kind_names()}
        # name and aliases -> language; a later family's language of the same name replaces
        self.languages = {
            n: lang for f in self.families.values() for lang in f.languages for n in lang.names()
        }


_lock = threading.Lock()
_index = _Index()
_plugins_loaded = False
_T = TypeVar("_T")


def register_family(family: DeviceFamily) -> DeviceFamily:
    """Make `family`'s kinds and languages known. Registering a family's name again replaces
    it; a kind another family serves is refused (ValueError naming that family)."""
    global _index
    from accelopt.problem import add_language_name

    with _lock:
        for kind in family.kind_names():
            owner = _index.by_kind.get(kind)
            if owner is not None and owner.name != family.name:
                raise ValueError(
                    f"device family {family.name!r}: kind {kind!r} belongs to family {owner.name!r}"
                )
        _index = _Index([*_index.families.values(), family])
    for lang in family.languages:
        for name in lang.names():
            add_language_name(name)  # solution files may name it
    return family


for _family in FAMILIES:
    register_family(_family)


def _load_plugins() -> None:
    """The `accelopt.devices` entry points of installed packages, once (each registers its
    family when loaded)."""
    global _plugins_loaded
    if _plugins_loaded:
        return
    _plugins_loaded = True
    from accelopt.plugins import DEVICE_GROUP, load_plugins, use_device_plugin

    load_plugins(DEVICE_GROUP, use_device_plugin)


def _looked_up(find: Callable[[_Index], _T | None]) -> _T | None:
    """What `find` finds among the registered families, asked again once the plugins are loaded
    when it misses (a plugin's family registers as it loads)."""
    found = find(_index)
    if found is None:
        _load_plugins()
        found = find(_index)
    return found


def list_families() -> list[DeviceFamily]:
    """Every family, the built-in ones first, then the plugins'."""
    _load_plugins()
    return list(_index.families.values())


def runtime_reason(code: str | None) -> str | None:
    """What a family says of a profile whose reason code an export reads as a runtime error
    (`DeviceFamily.runtime_reasons`); None for any other code."""
    if code is None:
        return None
    for family in list_families():
        if code in family.runtime_reasons:
            return family.runtime_reasons[code]
    return None


def get_family(name: str) -> DeviceFamily:
    """The family named `name` (KeyError naming the known ones)."""
    found = _looked_up(lambda index: index.families.get(name))
    if found is None:
        raise KeyError(f"no device family {name!r}; known: {', '.join(f.name for f in list_families())}")
    return found


def family_of(kind: str) -> DeviceFamily | None:
    """The family that serves the device kind `kind`, or None."""
    return _looked_up(lambda index: index.by_kind.get(kind))


def registered_kinds() -> list[str]:
    _load_plugins()
    return sorted(_index.by_kind)


def unknown_kind(kind: str) -> str:
    """The error for a kind no family serves: the known kinds, and the plugins that failed."""
    from accelopt.plugins import DEVICE_GROUP, describe_failures

    return f"unknown device kind {kind!r}; known: {', '.join(registered_kinds())}{describe_failures(DEVICE_GROUP)}"


def agent_languages(kind: str) -> tuple[str, ...] | None:
    """The kernel languages the agent of `kind` runs, without making one; None for a kind no
    family serves or whose family takes any language (then nothing is refused up front)."""
    family = family_of(kind)
    return family.language_names() if family is not None else None


def available_devices() -> list[str]:
    """Kinds whose family can profile on this machine (its probe says so, or it has none)."""
    out: list[str] = []
    for family in list_families():
        try:
            ok = family.probe() if family.probe is not None else True
        except Exception:
            ok = False
        if ok:
            out.extend(family.kind_names())
    return sorted(out)


def get_agent(kind: str, **options: Any) -> HardwareAgent:
    """The agent of `kind`, made by its family with `options` (KeyError for an unknown kind)."""
    family = family_of(kind)
    if family is None:
        from accelopt.plugins import DEVICE_GROUP, describe_failures

        raise KeyError(
            f"no hardware agent for device kind {kind!r}; registered: {registered_kinds()}"
            f"{describe_failures(DEVICE_GROUP)}"
        )
    return family.make_agent(kind, **options)


def run_refusal(devices: Iterable[str], options: Mapping[str, Mapping[str, Any]]) -> str | None:
    """Why a run on `devices` may not start (a family's `refuse_run`, e.g. the simulated device
    without its opt-in), or None. `options`: the run config's agent options by kind."""
    for kind in dict.fromkeys(devices):
        family = family_of(kind)
        if family is not None and family.refuse_run is not None:
            why = family.refuse_run(options.get(kind) or {})
            if why:
                return why
    return None


def device_slot(kind: str, index: int, count: int) -> dict[str, Any]:
    """Agent options giving profiler `index` of `count` on this host a device of its own (the
    family's `slots`); {} for one profiler or a family without slots. SlotError where the host
    has too few."""
    family = family_of(kind)
    if count <= 1 or family is None or family.slots is None:
        return {}
    return {family.slots.agent_option: family.slots.pick(index, count)}


def profile_timeout_s(kind: str, profiling: ProfilingConfig | None = None) -> float:
    """How long one profile of `kind` may take: the run config's `profiling` limit where it
    sets one (`ProfilingConfig.timeout_for`), else the family's default (60 s for a kind no
    family serves)."""
    family = family_of(kind)
    default_s = family.profile_timeout_s if family is not None else 60.0
    return profiling.timeout_for(kind, default_s) if profiling is not None else default_s


def kinds_running(language: str) -> list[str]:
    """The device kinds whose agents run `language`, sorted (a family that takes any language
    is not named)."""
    return [k for k in registered_kinds() if language in (agent_languages(k) or ())]


def language_named(name: str) -> KernelLanguage | None:
    """The language registered as `name` (its name or an alias), loading the plugins once
    before giving up."""
    return _looked_up(lambda index: index.languages.get(name))


def registered_languages() -> list[KernelLanguage]:
    """Every registered language once, in registration order (plugins' not loaded here: a
    lookup that misses loads them)."""
    return list({id(lang): lang for lang in _index.languages.values()}.values())
