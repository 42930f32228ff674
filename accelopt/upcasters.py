"""Upcasters: how a message written by an older version of an event type reads today.

Every event type has its own version: the default of its `schema_version` field (1 unless the
type declares another, `accelopt/catalog.py`), written with each message. A change to a
type's fields that an old message would not decode to as meant (a renamed field, a value
that moved) raises the type's version by one and adds here the step from the version before:
`(type name, old version) -> function`, a pure function of the message as a dict (msgpack
decoded, not yet typed) that returns it as the next version writes it. `events.codec.decode`
applies the chain, one step at a time, before it decodes the message into its type, so a log
written before the change still folds, verifies and ablates. A step never reads the clock or
anything outside the message; `tests/events/test_upcasters.py` checks that every version has
its chain. A fact a new version records that an old message left to its readers to derive
from the log before it (a fix's lineage, the kernels a beam keeps) reads as None here, "not
recorded", and is derived once by `accelopt/old_log_facts.py`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

Raw = dict[str, Any]
Upcaster = Callable[[Raw], Raw]


class UpcastError(ValueError):
    """A message of a version this AccelOpt cannot read: newer than its type, or older with
    no step to read it by."""


def _rename(raw: Raw, old: str, new: str) -> Raw:
    out = {k: v for k, v in raw.items() if k != old}
    if old in raw:
        out[new] = raw[old]
    return out


def _run_completed_v1(raw: Raw) -> Raw:
    """v2 of RunCompleted: `best` (problem -> kernel id) is `best_kernel_ids`."""
    return _rename(raw, "best", "best_kernel_ids")


def _kernel_profiled_v1(raw: Raw) -> Raw:
    """v2 of KernelProfiled: a profile's status is generic; the Triton family's
    `no_triton_launch` status is `incorrect` with that reason code."""
    profile = raw.get("profile")
    if isinstance(profile, dict) and profile.get("status") == "no_triton_launch":
        return {**raw, "profile": {**profile, "status": "incorrect", "reason": "no_triton_launch"}}
    return raw


def _not_recorded(*fields: str) -> Upcaster:
    """The step to a version that records `fields`, facts a message of the version before
    left to its readers: they read as None, "not recorded", and `accelopt/old_log_facts.py`
    derives them once from the log before the message (a step sees one message only)."""

    def step(raw: Raw) -> Raw:
        return {**raw, **dict.fromkeys(fields)}

    step.__doc__ = f"v2: {', '.join(fields)} not recorded (None), for `old_log_facts` to fill in"
    return step


def _kernel_proposed_v1(raw: Raw) -> Raw:
    """v2 of KernelProposed: a fix carries its lineage; version 1's fixer named none (its
    parent_id and plan_id are None, "not recorded"); other proposals read unchanged."""
    return _not_recorded("parent_id", "plan_id")(raw) if raw.get("fix_of") else raw


# (event type, the version a step reads) -> the step to the next version
UPCASTERS: dict[tuple[str, int], Upcaster] = {
    ("RunCompleted", 1): _run_completed_v1,
    ("KernelProfiled", 1): _kernel_profiled_v1,
    ("KernelProposed", 1): _kernel_proposed_v1,  # v2: a fix's lineage
    ("FixRequested", 1): _not_recorded("parent_id", "plan_id"),  # v2: the lineage a fix inherits
    ("IterationCompleted", 1): _not_recorded("kept"),  # v2: the kernels a problem keeps
}


def upcast(raw: Raw, current: int, steps: dict[tuple[str, int], Upcaster] = UPCASTERS) -> Raw:
    """`raw` (a message of its type's version `raw["schema_version"]`, 1 where absent) as
    version `current` of its type writes it."""
    name = str(raw.get("type"))
    version = raw.get("schema_version", 1)
    if not isinstance(version, int) or version < 1:
        raise UpcastError(f"schema_version {version!r} is not a version")
    if version > current:
        raise UpcastError(
            f"{name} version {version} is newer than this AccelOpt's ({current}); upgrade AccelOpt"
        )
    while version < current:
        step = steps.get((name, version))
        if step is None:
            raise UpcastError(f"no upcaster reads {name} version {version} (this AccelOpt writes {current})")
        raw = step(raw)
        version += 1
    return {**raw, "schema_version": current}
