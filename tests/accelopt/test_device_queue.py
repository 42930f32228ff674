"""The device queue's decider (accelopt/device_queue.py): one profile at a time per slot,
round robin between sessions, each session's limits (in flight, device-seconds)."""

from __future__ import annotations

import random

import pytest

from accelopt.device_queue import DeviceQueue, Limits, Refuse, Start


def started(decisions: list) -> list[str]:
    return [d.request_id for d in decisions if isinstance(d, Start)]


def drain(q: DeviceQueue, first: str) -> list[str]:
    """Finish what runs, one at a time, until nothing is left: the order requests started."""
    order = [first]
    running = [first]
    while running:
        rid = running.pop(0)
        for d in q.finish(rid, 1.0):
            assert isinstance(d, Start)
            order.append(d.request_id)
            running.append(d.request_id)
    return order


def test_one_profile_at_a_time_per_device_slot() -> None:
    q = DeviceQueue()
    assert started(q.submit("a1", "A", "cpu")) == ["a1"]
    assert q.submit("b1", "B", "cpu") == []  # the slot is a1's
    assert started(q.submit("h1", "B", "h100")) == ["h1"]  # another device: its own slot
    assert started(q.finish("a1", 2.0)) == ["b1"]
    two = DeviceQueue(slots={"sim": 2})
    assert started(two.submit("x", "A", "sim")) == ["x"]
    assert started(two.submit("y", "B", "sim")) == ["y"]
    assert two.submit("z", "C", "sim") == []


def test_a_freed_slot_goes_round_robin_between_sessions_not_to_the_oldest_request() -> None:
    q = DeviceQueue()
    assert started(q.submit("a0", "A", "cpu")) == ["a0"]
    for i in range(1, 5):
        q.submit(f"a{i}", "A", "cpu")  # A queues four more
    q.submit("b1", "B", "cpu")
    q.submit("b2", "B", "cpu")
    q.submit("c1", "C", "cpu")
    # A just started one: B and C (who never did) go first, then the one served longest ago
    assert [q.ahead(r) for r in ("b1", "c1", "a1", "b2", "a2")] == [0, 1, 2, 3, 4]
    # arrival order would be a0 a1 a2 a3 a4 b1 b2 c1; each session in turn instead
    assert drain(q, "a0") == ["a0", "b1", "c1", "a1", "b2", "a2", "a3", "a4"]


def test_a_session_over_its_in_flight_limit_is_refused_and_the_others_still_served() -> None:
    q = DeviceQueue(Limits(max_in_flight=2))
    q.submit("a1", "A", "cpu")
    q.submit("a2", "A", "cpu")
    (refused,) = q.submit("a3", "A", "cpu")
    assert isinstance(refused, Refuse) and "at its limit of 2 profiles running or waiting" in refused.reason
    assert q.submit("b1", "B", "cpu") == []  # B is not held to A's count: it waits its turn
    assert started(q.finish("a1", 1.0)) == ["b1"]  # round robin: B before A's second
    assert started(q.submit("a3", "A", "cpu")) == []  # A has room again (a2 waiting, a3 now)
    state = {s.session: s for s in q.snapshot().sessions}
    assert (state["A"].waiting, state["A"].refused, state["B"].running) == (2, 1, 1)


def test_a_session_over_its_device_seconds_is_refused_even_what_it_had_queued() -> None:
    q = DeviceQueue(Limits(device_s=10.0))
    q.submit("a1", "A", "cpu")
    q.submit("b1", "B", "cpu")
    q.submit("a2", "A", "cpu")  # queued while A still had budget
    decisions = q.finish("a1", 12.5)  # A has used 12.5 of 10 s now
    assert started(decisions) == ["b1"]
    decisions = q.finish("b1", 1.0)
    (refused,) = decisions  # a2's turn: refused, not started
    assert isinstance(refused, Refuse) and refused.request_id == "a2"
    assert refused.reason == (
        "session A used 12.5 of its 10 device-seconds: no more profiles for it on this server"
    )
    (again,) = q.submit("a3", "A", "cpu")
    assert isinstance(again, Refuse) and "12.5 of its 10" in again.reason
    assert started(q.submit("b2", "B", "cpu")) == ["b2"]  # B, under its budget, is served
    state = {s.session: s for s in q.snapshot().sessions}
    assert (state["A"].device_s, state["A"].refused, state["B"].device_s) == (12.5, 2, 1.0)


def test_cancel_frees_a_slot_or_a_place() -> None:
    q = DeviceQueue()
    q.submit("a1", "A", "cpu")
    q.submit("b1", "B", "cpu")
    q.submit("c1", "C", "cpu")
    assert q.cancel("b1") == []  # it only waited
    assert started(q.cancel("a1", 0.5)) == ["c1"]  # it ran: its slot goes on
    assert q.cancel("nobody") == []
    (dev,) = q.snapshot().devices
    assert (dev.running, dev.waiting) == (["C"], 0)
    assert {s.session: s.device_s for s in q.snapshot().sessions}["A"] == 0.5


def test_any_interleaving_starts_every_request_once_with_at_most_one_per_slot() -> None:
    rnd = random.Random(7)
    q = DeviceQueue(Limits(max_in_flight=3))
    running: list[str] = []
    done: list[str] = []
    refused: list[str] = []
    submitted: list[str] = []
    for i in range(400):
        if running and rnd.random() < 0.45:
            rid = running.pop(rnd.randrange(len(running)))
            decisions = q.finish(rid, 0.1)
            done.append(rid)
        else:
            submitted.append(f"r{i}")
            decisions = q.submit(f"r{i}", f"s{rnd.randrange(8)}", "cpu")
        for d in decisions:
            (running if isinstance(d, Start) else refused).append(d.request_id)
        assert len(running) <= 1
    while running:
        rid = running.pop()
        done.append(rid)
        for d in q.finish(rid, 0.1):
            (running if isinstance(d, Start) else refused).append(d.request_id)
    # every request ran once or was refused once: none lost, none twice
    assert sorted(done + refused) == sorted(submitted)
    assert refused  # the in-flight limit of 3 was met on the way
    (dev,) = q.snapshot().devices
    assert dev.waiting == 0 and dev.running == []


def test_a_request_id_is_used_once() -> None:
    q = DeviceQueue()
    q.submit("a1", "A", "cpu")
    with pytest.raises(ValueError, match="in the queue already"):
        q.submit("a1", "B", "cpu")
