"""The device family descriptor: what the layers above `hardware_agents/` know about a device.

A device family is the device kinds one hardware agent serves (`h100`, `h200`, `b200` for the
Triton agent) together with every fact and hook the rest of AccelOpt needs about them, in one
`DeviceFamily` record:

- `kinds`: each kind's name, the hardware that times it, its cited roofline peaks and the Ray
  label of its nodes (`DeviceKind`);
- `languages`: the kernel languages the family brings (`KernelLanguage`: fence, conventions,
  the prompt's interface lines, tuner syntax), and `runs`, the ones its agents run (or
  `any_language`: a family that never compiles a kernel, such as the simulated device);
- `make_agent(kind, **options)` and `options`, the agent's options by name and type;
- `slots`: how a host's devices are shared among profilers (the Ray resource a profiler
  holds, the agent option that pins one device, what it holds on a cluster without any);
- `refuse_run`: why a run must not start on the family (the simulated device without its
  opt-in), and `probe`: whether this machine can profile it at all;
- `capabilities`: timed, interpreted, estimated or simulated profiles;
- `profile_timeout_s`, and `calibrate` for a family whose peaks are measured on the host.

The registry (`hardware_agents/families.py`) lists the built-in families and takes plugins'
(`register_family`). The command line, the language lookups, the session, the suites, the
profiler actor, Ray placement and the memory's retrieval ask it, never a family's modules.
Every field is data or a hook that imports the family's heavy modules (its agent, its
conventions) only when called, so importing a descriptor is cheap. See
docs/adding-a-device.md.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any

import msgspec

from hardware_agents.base import HardwareAgent
from hardware_agents.kernel_language import KernelLanguage
from hardware_agents.pipeline.device_spec import DeviceSpec

__all__ = [
    "AgentOption",
    "Calibration",
    "CalibrationError",
    "Capabilities",
    "DeviceFamily",
    "DeviceKind",
    "DeviceSlots",
    "SlotError",
]

KindName = Annotated[str, msgspec.Meta(pattern=r"^[A-Za-z0-9_-]{1,64}$")]
"""A kind is a subject token (profile requests go to `accelopt.<run>.profile.requested.<kind>`)."""


class SlotError(ValueError):
    """A host cannot give profiler `index` of `count` a device of its own."""


@dataclass(frozen=True, kw_only=True)
class DeviceKind:
    """One device kind of a family."""

    name: str
    hardware: str  # what a timed profile of this kind runs on, in words ("an NVIDIA H100 GPU")
    spec: DeviceSpec | None = None  # cited roofline peaks; None: measured where it runs (`calibrate`)
    node_label: str | None = None  # the Ray resource that labels this generation's nodes


@dataclass(frozen=True)
class AgentOption:
    """One keyword option of the family's agent (`devices.<kind>.options.<name>` in a run
    config): `type` is what `msgspec.convert` checks a configured value against."""

    name: str
    type: Any
    help: str = ""


@dataclass(frozen=True, kw_only=True)
class DeviceSlots:
    """How a host's devices of the family are shared: one profiler holds one slot.

    `ray_resource` is what a profiler actor asks Ray for: "GPU" (Ray's `num_gpus`) or a
    custom resource its nodes declare (`neuron_cores`); `agent_option` is the agent option
    that pins a slot and `pick(index, count)` its value for profiler `index` of `count`
    (`accelopt worker --count`; SlotError where the host has too few). On a cluster with none
    of the resource a profiler holds `cpus_without` CPUs instead and profiles without the
    device (its `capabilities` say how)."""

    ray_resource: str
    agent_option: str
    pick: Callable[[int, int], Any]
    cpus_without: float = 1.0


@dataclass(frozen=True, kw_only=True)
class Capabilities:
    """What the family's profiles are. `timed`: latencies measured on the device; `interpreted`:
    correctness checked without the device (an interpreter, a simulator, an emulator; status
    `unmeasured`); `estimated`: a cost model's latency without the device
    (`Profile.estimate`); `simulated`: made-up results (a test device).
    `interpretable_elements`: input elements its device-less check handles in seconds to a
    minute (suite importers size the check workloads by it)."""

    timed: bool = False
    interpreted: bool = False
    estimated: bool = False
    simulated: bool = False
    interpretable_elements: int | None = None

    def names(self) -> tuple[str, ...]:
        flags = ("timed", "interpreted", "estimated", "simulated")
        return tuple(n for n in flags if getattr(self, n))


class CalibrationError(RuntimeError):
    """A family's peaks could not be measured on this host (the reason in words)."""


class Calibration(msgspec.Struct, frozen=True, kw_only=True):
    """A family's peaks measured on this host (`accelopt calibrate`)."""

    spec: DeviceSpec
    quick: bool
    created: str
    seconds: float
    cached_at: str  # the file it is cached in
    warnings: tuple[str, ...] = ()  # e.g. a busy machine: the peaks are probably under-measured
    record: dict[str, Any] = {}  # the family's own record of the measurement (printed by --json)


CalibrateHook = Callable[[Path | None, bool, bool], Calibration]
"""(cache_dir, force, quick) -> the cached calibration, measured first if missing or forced
(CalibrationError where it cannot be measured)."""


@dataclass(frozen=True, kw_only=True)
class DeviceFamily:
    """One device family (see the module doc)."""

    name: str
    kinds: tuple[DeviceKind, ...]
    make_agent: Callable[..., HardwareAgent]  # (kind, **options) -> the agent
    options: tuple[AgentOption, ...]
    capabilities: Capabilities
    languages: tuple[KernelLanguage, ...] = ()  # the languages this family brings
    runs: tuple[str, ...] | None = None  # language names its agents run; None: `languages`' names
    any_language: bool = False  # takes a kernel in any language (never compiles it): none refused
    profile_timeout_s: float = 60.0  # one profile (compile, every seed, timing) by default
    probe: Callable[[], bool] | None = None  # can this machine profile the family? None: yes
    slots: DeviceSlots | None = None  # None: a profiler holds one CPU
    refuse_run: Callable[[Mapping[str, Any]], str | None] | None = None  # (its options) -> why not
    calibrate: CalibrateHook | None = None
    # reason codes (Profile.reason) of its profiles that an export reads as a runtime error,
    # with what to say: e.g. a check that launched no kernel of the family's language
    runtime_reasons: Mapping[str, str] = field(default_factory=dict)
    _options: dict[str, AgentOption] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        names = [k.name for k in self.kinds]
        if not names or len(set(names)) != len(names):
            raise ValueError(f"device family {self.name!r}: kinds {names} must be distinct and not empty")
        for n in names:
            try:
                msgspec.convert(n, KindName)
            except msgspec.ValidationError:
                raise ValueError(
                    f"device family {self.name!r}: kind {n!r} is not a subject token ([A-Za-z0-9_-], 1-64)"
                ) from None
        object.__setattr__(self, "_options", {o.name: o for o in self.options})

    def kind_names(self) -> tuple[str, ...]:
        return tuple(k.name for k in self.kinds)

    def kind(self, name: str) -> DeviceKind:
        return next(k for k in self.kinds if k.name == name)

    def language_names(self) -> tuple[str, ...] | None:
        """The kernel languages its agents run; None for a family that takes any."""
        if self.any_language:
            return None
        if self.runs is not None:
            return self.runs
        return tuple(n for lang in self.languages for n in lang.names())

    def option_errors(self, kind: str, options: Mapping[str, Any]) -> list[str]:
        """What is wrong with `options` for the agent of `kind`: unknown names, wrong types."""
        errors = []
        for name, value in options.items():
            opt = self._options.get(name)
            if opt is None:
                errors.append(
                    f"devices.{kind}.options.{name}: the {kind} agent has no option {name!r} "
                    f"(its options: {', '.join(sorted(self._options))})"
                )
                continue
            try:
                msgspec.convert(value, opt.type)
            except msgspec.ValidationError as e:
                errors.append(f"devices.{kind}.options.{name}: {e}")
        return errors
