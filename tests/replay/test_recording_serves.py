"""What a recorded run serves to a run that repeats it (an ablation, a resume on a recording):
each profile request the recording made is served the profile it was answered with, so the
new run's decisions and prompts see what the recorded ones saw, byte for byte.

`data/run_before_content_ids.aolog` is a real run recorded when kernels were named by request:
a source proposed twice was profiled twice, the second time from the profiler's cache (its
counters say `cached`). Served by source alone, the second request got the first profile:
6 of its 11 search profiles were not the ones recorded, and a planner prompt showing such a
kernel's profile (its lines shuffled by their number) was another prompt, an LLM call made
anew by an unchanged ablation."""

from __future__ import annotations

from pathlib import Path

import msgspec
import pytest

from accelopt import catalog as ev
from events.logfile import read_events
from replay.recording import Recording

DATA = Path(__file__).parent / "data"


@pytest.mark.parametrize("log", ["run_before_content_ids.aolog", "run_before_event_versions.aolog"])
def test_each_recorded_request_is_served_the_profile_it_was_answered_with(log: str) -> None:
    events = read_events(DATA / log)
    rec = Recording.from_events(events)
    requests = {e.event_id: e for e in events if isinstance(e, ev.ProfileRequested)}
    answered = [
        e
        for e in events
        if isinstance(e, ev.KernelProfiled) and requests[e.request_id].purpose != "remeasure"
    ]
    assert answered
    for e in answered:
        served = rec.profile_for(requests[e.request_id])
        assert served is not None and served.event_id == e.event_id, e.kernel_id
    if log == "run_before_content_ids.aolog":  # the case the rule is for is in this log
        assert sum("cached" in e.profile.counters for e in answered) == 6 and len(answered) == 11


def test_a_request_the_recording_did_not_make_is_served_the_first_profile_of_its_source() -> None:
    events = read_events(DATA / "run_before_content_ids.aolog")
    rec = Recording.from_events(events)
    requests = {e.event_id: e for e in events if isinstance(e, ev.ProfileRequested)}
    first: dict[str, ev.KernelProfiled] = {}
    for e in events:
        if isinstance(e, ev.KernelProfiled):
            first.setdefault(requests[e.request_id].source, e)
    cached = next(e for e in events if isinstance(e, ev.KernelProfiled) and "cached" in e.profile.counters)
    req = requests[cached.request_id]
    # another id (a decision the recording did not make): the first profile of the source
    other = msgspec.structs.replace(req, event_id="not-recorded")
    assert rec.profile_for(other) is first[req.source] and first[req.source] is not cached
    # the recorded id with another source (a changed setting): that source's, never this id's
    base = next(r for r in requests.values() if r.source != req.source and r.purpose != "remeasure")
    moved = msgspec.structs.replace(base, event_id=req.event_id)
    assert rec.profile_for(moved) is first[base.source]
