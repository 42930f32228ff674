"""A 3-node JetStream cluster on loopback (three real nats-server processes) with the event
stream at replicas 3: one node is killed mid-run and the run completes with nothing lost.
The node killed is one that holds a follower of the run (the coordinator's or the driver's
ephemeral consumer lives on one node): before followers checked their consumer, losing that
node left them waiting forever on fetches that only time out."""

from __future__ import annotations

import asyncio
import threading
from collections import Counter
from collections.abc import Awaitable, Callable
from typing import TypeVar

import pytest
from nats.js import api

import suites
from accelopt import catalog as c
from actors.runtime.session import SessionOptions, run_session
from events.log import EventLog
from events.logfile import read_events
from events.server import start_cluster
from events.subjects import STREAM, run_filter
from replay.verify import verify

T = TypeVar("T")


@pytest.fixture
def cluster(tmp_path):
    nodes = start_cluster(tmp_path, timeout=30)
    yield nodes
    for n in nodes:
        n.kill()


def test_run_survives_losing_a_node(ray_session, cluster, run_config):
    url = ",".join(n.url for n in cluster)
    cfg = run_config(
        "problems=[matmul]",
        "search.iterations=2",
        "log.replicas=3",
        "workers.ack_wait_s=6",
        "workers.heartbeat_s=1",
    )
    killed: list[str] = []
    infos: list[api.StreamInfo] = []
    holders: list[set[str]] = []

    def on_event(e: c.Event, view) -> None:
        if isinstance(e, c.IterationCompleted) and e.iteration == 1 and not killed:
            info = _stream_info(url)
            infos.append(info)
            if info.config.num_replicas != 3 or len((info.cluster and info.cluster.replicas) or []) != 2:
                killed.append("none: the stream is not replicated")  # reported by the assertions below
                return
            holders.append(_follower_nodes(url, e.run_id))
            victim = next(n for n in cluster if n.name in holders[0]) if holders[0] else cluster[2]
            victim.kill()
            killed.append(victim.name or "")

    outcome = run_session(
        cfg,
        [suites.get_problem("cpu/matmul")],
        SessionOptions(nats_url=url, on_event=on_event, timeout_s=600),
    )
    assert infos, "the run never reached the point where a node is killed"
    info = infos[0]
    assert info.config.num_replicas == 3, info.config
    assert info.cluster is not None and info.cluster.leader is not None, info.cluster
    followers = info.cluster.replicas or []
    assert len(followers) == 2 and not any(p.offline for p in followers), followers  # leader + 2 replicas
    assert {info.cluster.leader, *(p.name for p in followers)} == {n.name for n in cluster}
    assert holders and holders[0] and killed[0] in holders[0], (killed, holders)  # a follower's node went
    assert outcome.view.completed is not None and outcome.view.completed.reason == "completed"
    events = read_events(outcome.run_dir / "log.aolog")
    assert verify(events).ok
    iterations = [e.iteration for e in events if isinstance(e, c.IterationCompleted)]
    assert iterations == [0, 1, 2]
    requested = [e.event_id for e in events if isinstance(e, c.ProfileRequested)]
    profiled = Counter(e.request_id for e in events if isinstance(e, c.KernelProfiled))
    assert sorted(profiled) == sorted(requested) and set(profiled.values()) == {1}
    ids = [e.event_id for e in events]
    assert len(ids) == len(set(ids))


def _ask(url: str, question: Callable[[EventLog], Awaitable[T]]) -> T:
    """`question` asked of the log from a thread of its own (callable inside a running loop)."""
    out: list[T] = []

    async def get() -> None:
        elog = await EventLog.connect(url, create=False)
        try:
            out.append(await question(elog))
        finally:
            await elog.close()

    t = threading.Thread(target=asyncio.run, args=(get(),))
    t.start()
    t.join(60)
    assert out, "the log did not answer"
    return out[0]


def _follower_nodes(url: str, run_id: str) -> set[str]:
    """The nodes holding the run's ephemeral consumers (the coordinator's and driver's followers)."""

    async def leaders(elog: EventLog) -> set[str]:
        infos = await elog.js.consumers_info(STREAM)
        return {
            i.cluster.leader
            for i in infos
            if not i.config.durable_name
            and i.cluster
            and i.cluster.leader
            and i.config.filter_subject == run_filter(run_id)
        }

    return _ask(url, leaders)


def _stream_info(url: str) -> api.StreamInfo:
    """The event stream's info."""
    return _ask(url, lambda elog: elog.stream_info())
