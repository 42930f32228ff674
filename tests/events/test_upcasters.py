"""Versioned event types: each type's version is the default of its `schema_version`; a message
of an older version is read through the type's chain of upcasters (`accelopt/upcasters.py`)
before it is decoded; a newer one, or one no chain reads, is refused with one clear line."""

from __future__ import annotations

import msgspec
import pytest

from accelopt import catalog as ev
from accelopt.upcasters import UPCASTERS, UpcastError, upcast
from events.codec import EventDecodeError, decode, encode


def _raw(e: ev.Event) -> dict:
    return msgspec.msgpack.decode(encode(e))


def test_every_version_after_the_first_has_its_chain_and_no_step_reads_a_current_version() -> None:
    for t, version in ev.VERSION_OF.items():
        assert version >= 1
        for old in range(1, version):
            assert (t.__name__, old) in UPCASTERS, f"{t.__name__}: no upcaster from version {old}"
    for name, old in UPCASTERS:
        assert old < ev.VERSION_OF[ev.EVENTS_BY_NAME[name]], f"{name}: a step from version {old}"


def test_a_type_s_version_is_what_its_new_messages_say() -> None:
    done = ev.RunCompleted(event_id="x", run_id="r", ts=1.0, reason="completed", best_kernel_ids={"p": "k"})
    assert ev.VERSION_OF[ev.RunCompleted] == 2 == done.schema_version == _raw(done)["schema_version"]
    assert ev.VERSION_OF[ev.MemoryIndexed] == 1


def test_a_renamed_field_is_read_from_a_message_of_the_version_before() -> None:
    """RunCompleted version 1 named the best kernels `best`: its upcaster renames the field.
    Without the upcaster the old message would decode with the field silently empty."""
    done = ev.RunCompleted(event_id="x", run_id="r", ts=1.0, reason="completed", best_kernel_ids={"p": "k"})
    old = {k: v for k, v in _raw(done).items() if k != "best_kernel_ids"} | {"best": {"p": "k"}}
    old["schema_version"] = 1
    back = decode(msgspec.msgpack.encode(old), "accelopt.r.run.completed", 9)
    assert back == done and back.schema_version == 2


def test_a_family_s_status_of_version_1_is_a_generic_status_and_its_reason() -> None:
    """KernelProfiled version 1 could say `no_triton_launch` as a status; version 2 says
    `incorrect` with that reason (the Triton family's code); other profiles read unchanged."""
    from accelopt.profile import Profile

    prof = Profile(
        status="incorrect", reason="no_triton_launch", device="h100", log="launched no Triton kernel"
    )
    done = ev.KernelProfiled(
        event_id="x",
        run_id="r",
        ts=1.0,
        kernel_id="k",
        problem="p",
        device="h100",
        request_id="q",
        profile=prof,
    )
    old = _raw(done)
    old["schema_version"] = 1
    old["profile"] = {k: v for k, v in old["profile"].items() if k != "reason"} | {
        "status": "no_triton_launch"
    }
    back = decode(msgspec.msgpack.encode(old), "accelopt.r.profile.completed", 3)
    assert back == done and back.schema_version == 2
    other = {**old, "profile": {**old["profile"], "status": "timeout"}}
    assert decode(msgspec.msgpack.encode(other)).profile == Profile(
        status="timeout", device="h100", log="launched no Triton kernel"
    )


def test_the_chain_runs_one_step_at_a_time() -> None:
    seen: list[int] = []

    def step(n: int):
        def f(raw: dict) -> dict:
            seen.append(n)
            return {**raw, "trail": [*raw.get("trail", []), n]}

        return f

    steps = {("T", 1): step(1), ("T", 2): step(2), ("T", 3): step(3)}
    out = upcast({"type": "T", "schema_version": 2}, 4, steps)
    assert seen == [2, 3] and out == {"type": "T", "schema_version": 4, "trail": [2, 3]}
    assert upcast({"type": "T"}, 1, steps) == {"type": "T", "schema_version": 1}  # no version: 1
    with pytest.raises(UpcastError, match="no upcaster reads T version 1"):
        upcast({"type": "T", "schema_version": 1}, 2, {})


def test_a_newer_version_and_a_missing_step_are_one_clear_error(monkeypatch) -> None:
    raw = _raw(ev.MemoryIndexed(event_id="x", run_id="r", ts=1.0, entry_id="m"))
    with pytest.raises(
        EventDecodeError, match=r"MemoryIndexed version 3 is newer than this AccelOpt's \(1\)"
    ):
        decode(msgspec.msgpack.encode({**raw, "schema_version": 3}), "s", 4)
    old = {
        "type": "RunCompleted",
        "event_id": "x",
        "run_id": "r",
        "ts": 1.0,
        "schema_version": 1,
        "reason": "c",
    }
    monkeypatch.delitem(UPCASTERS, ("RunCompleted", 1))
    with pytest.raises(EventDecodeError, match="no upcaster reads RunCompleted version 1") as ei:
        decode(msgspec.msgpack.encode(old), "accelopt.r.run.completed", 5)
    assert "stream sequence 5" in str(ei.value)


def test_a_bad_shape_of_the_current_version_keeps_its_error() -> None:
    raw = _raw(ev.MemoryIndexed(event_id="x", run_id="r", ts=1.0, entry_id="m"))
    with pytest.raises(EventDecodeError, match=r"Expected `str`, got `int` - at `\$.entry_id`"):
        decode(msgspec.msgpack.encode({**raw, "entry_id": 3}), "s", 1)
