"""Every event type encodes and decodes to an equal value; bad messages name where they sit."""

from __future__ import annotations

import msgspec
import pytest

from events import EVENT_TYPES, VERSION_OF, EventDecodeError, decode, encode, subject_for


def test_every_event_type_is_sampled(sample_events):
    assert {type(e) for e in sample_events("r1")} == set(EVENT_TYPES)


def test_round_trip_every_type(sample_events):
    for ev in sample_events("r1"):
        data = encode(ev)
        back = decode(data, subject_for(ev), 1)
        assert back == ev
        assert type(back) is type(ev)
        assert msgspec.msgpack.decode(data)["schema_version"] == VERSION_OF[type(ev)] == back.schema_version


def test_unknown_type_names_subject_and_sequence():
    data = msgspec.msgpack.encode({"type": "NoSuchEvent", "event_id": "x", "run_id": "r", "ts": 1.0})
    with pytest.raises(EventDecodeError) as ei:
        decode(data, "accelopt.r.plan.requested", 42)
    msg = str(ei.value)
    assert "unknown event type" in msg and "accelopt.r.plan.requested" in msg and "42" in msg


def test_bad_shape_names_the_field():
    data = msgspec.msgpack.encode(
        {
            "type": "PlanRequested",
            "event_id": "x",
            "run_id": "r",
            "ts": 1.0,
            "problem": "p",
            "iteration": "one",
            "candidate_id": "k",
            "sample_index": 0,
        }
    )
    with pytest.raises(EventDecodeError, match=r"iteration"):
        decode(data, "accelopt.r.plan.requested", 7)


def test_newer_schema_version_is_refused(sample_events):
    ev = sample_events("r1")[-1]
    raw = msgspec.msgpack.decode(encode(ev))
    raw["schema_version"] = 99
    with pytest.raises(EventDecodeError, match="newer"):
        decode(msgspec.msgpack.encode(raw), "s", 1)


def test_garbage_is_not_msgpack():
    with pytest.raises(EventDecodeError, match="not msgpack"):
        decode(b"\xc1\xc1", "s", 3)


def test_profile_requests_carry_the_device(sample_events):
    req = next(e for e in sample_events("run-9") if e.type == "ProfileRequested")
    assert subject_for(req) == "accelopt.run-9.profile.requested.cpu"
