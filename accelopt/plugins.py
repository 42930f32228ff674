"""Out-of-tree extensions found through Python entry points.

A package installed next to AccelOpt can add device kinds and LLM providers without an
edit to this repository, by declaring entry points in its own `pyproject.toml`:

    [project.entry-points."accelopt.devices"]
    myaccel = "myaccel_agent"                 # a module that calls register_family on import,
                                              # or a zero-argument callable that does
    [project.entry-points."accelopt.llm_providers"]
    mycorp = "mycorp_llm:MyCorpLLM"           # a litellm.CustomLLM subclass (or instance):
                                              # serves every `mycorp/<model>` model

Entry points are read from the installed environment, so every process that runs agents
(the `accelopt run` driver, its Ray actors, `accelopt worker` hosts) finds the same
plugins without configuration. A plugin that fails to load is reported, by name and
error, where it is needed (`plugin_failures`), and never stops the others from loading.
"""

from __future__ import annotations

import importlib.metadata
import threading
from collections.abc import Callable
from types import ModuleType
from typing import Any

import msgspec

from accelopt.logging import get_logger

DEVICE_GROUP = "accelopt.devices"
LLM_PROVIDER_GROUP = "accelopt.llm_providers"

log = get_logger(component="plugins")


class PluginFailure(msgspec.Struct, frozen=True):
    group: str
    name: str
    value: str  # "module:attr" as declared
    error: str


_failures: dict[tuple[str, str], PluginFailure] = {}
_lock = threading.Lock()


def load_plugins(group: str, use: Callable[[str, Any], None]) -> list[str]:
    """Load every entry point of `group` and hand (name, loaded object) to `use`.

    Returns the names that loaded and were used; failures (import error, `use` raising) are
    logged and kept for `plugin_failures(group)`."""
    loaded: list[str] = []
    for ep in importlib.metadata.entry_points(group=group):
        try:
            use(ep.name, ep.load())
        except Exception as e:  # a broken plugin must not take the others (or the run) down
            failure = PluginFailure(
                group=group, name=ep.name, value=ep.value, error=f"{type(e).__name__}: {e}"
            )
            with _lock:
                _failures[(group, ep.name)] = failure
            log.warning("plugin_failed", group=group, plugin=ep.name, value=ep.value, error=failure.error)
            continue
        with _lock:
            _failures.pop((group, ep.name), None)
        loaded.append(ep.name)
    return loaded


def plugin_failures(group: str) -> list[PluginFailure]:
    with _lock:
        return [f for (g, _), f in sorted(_failures.items()) if g == group]


def describe_failures(group: str) -> str:
    """`; plugins that failed to load: a (mod:obj): Error: ...`, or "" when none failed."""
    failed = plugin_failures(group)
    if not failed:
        return ""
    return "; plugins that failed to load: " + ", ".join(f"{f.name} ({f.value}): {f.error}" for f in failed)


def use_device_plugin(name: str, obj: Any) -> None:
    """A device entry point is a module (importing it registered its family) or a callable."""
    if not isinstance(obj, ModuleType):
        if not callable(obj):
            raise TypeError(f"entry point {name!r} is neither a module nor callable: {type(obj).__name__}")
        obj()
