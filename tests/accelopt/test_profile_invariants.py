"""A Profile cannot lie about itself: its status must agree with its fields when it is built
(by an agent, by `msgspec.structs.replace`, or when a log is decoded)."""

from __future__ import annotations

import math

import msgspec
import pytest

from accelopt import catalog as ev
from accelopt.profile import LatencyStats, Profile
from events.codec import EventDecodeError, decode, encode


def lat(ms: float) -> LatencyStats:
    return LatencyStats(samples_ms=[ms], median_ms=ms, min_ms=ms, max_ms=ms, spread=0.0)


@pytest.mark.parametrize("latency", [None, lat(0.0), lat(-1.0), lat(math.nan), lat(math.inf)])
def test_a_passed_profile_without_a_positive_time_is_refused(latency) -> None:
    with pytest.raises(ValueError, match="a passed profile needs a positive latency"):
        Profile(status="passed", device="cpu", latency=latency)


def test_a_compile_error_with_a_time_or_a_fraction_of_peak_is_refused() -> None:
    with pytest.raises(ValueError, match="compile_error profile never ran"):
        Profile(status="compile_error", device="cpu", latency=lat(1.0))
    with pytest.raises(ValueError, match="compile_error profile never ran"):
        Profile(status="compile_error", device="cpu", peak_fraction=0.2)
    assert Profile(status="compile_error", device="cpu", log="error: expected ';'").latency is None


def test_what_agrees_is_built_and_a_change_is_checked_too() -> None:
    ok = Profile(status="passed", device="cpu", latency=lat(2.0), peak_fraction=0.1)
    assert ok.passed and ok.latency_ms == 2.0
    assert Profile(status="incorrect", device="cpu", latency=lat(2.0)).status == "incorrect"
    assert Profile(status="unmeasured", device="cpu").latency is None
    with pytest.raises(ValueError, match="passed profile"):
        msgspec.structs.replace(ok, latency=None)


def test_a_log_with_a_lying_profile_is_refused_in_one_line_not_misread() -> None:
    good = ev.KernelProfiled(
        event_id="x",
        run_id="r",
        ts=1.0,
        kernel_id="k",
        problem="p",
        device="cpu",
        request_id="q",
        profile=Profile(status="passed", device="cpu", latency=lat(2.0)),
    )
    raw = msgspec.msgpack.decode(encode(good))
    assert decode(encode(good)) == good
    raw["profile"].pop("latency")
    with pytest.raises(EventDecodeError, match="a passed profile needs a positive latency") as ei:
        decode(msgspec.msgpack.encode(raw), "accelopt.r.profile.completed", 12)
    assert "stream sequence 12" in str(ei.value) and "\n" not in str(ei.value)
