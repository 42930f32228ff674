"""A profile the MCP server gives up on is stopped on the warm pool of `accelopt up` too: the
agent cancels a call whose kernel hangs, the server publishes its `ProfileCancelled`, and the
pool's profiler kills that profile's sandboxed kernel (gone within seconds, not at the pool's
own 60 s limit), answers the request (a `timeout` of reason `cancelled`) and profiles the next
kernel at once. Real `accelopt up` (nats-server, Ray, the CPU profiler), real `accelopt mcp`
over stdio, a real C kernel that spins forever."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp_session import REPO, descendants, stdio_session, text_of, warm_pool

from accelopt import catalog as ev
from replay.fold import RunView

pytestmark = pytest.mark.timeout(600)

SILU = (REPO / "suites" / "cpu_v2" / "silu" / "baseline.c").read_text()
HANGS = 'void kernel(const float* x, float* out) { for (;;) { __asm__ volatile(""); } }\n'
QUEUED = "// queued\n" + HANGS  # another source: never a cached answer of the first
SANDBOX_CHILD = b"hardware_agents.sandbox.child"


def sandbox_children(below: int) -> dict[int, float]:
    """The live sandboxed children under process `below`: pid -> CPU seconds used."""
    found: dict[int, float] = {}
    tick = os.sysconf("SC_CLK_TCK")
    for pid in descendants(below):
        try:
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes()
            fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
        except OSError:
            continue
        if SANDBOX_CHILD in cmd and fields[0] != "Z":
            found[pid] = (int(fields[11]) + int(fields[12])) / tick
    return found


async def _pool_events(nats_url: str) -> list[ev.Event]:
    """The MCP session's run on the pool's log (none yet: [])."""
    from events.log import EventLog

    elog = await EventLog.connect(nats_url, create=False)
    try:
        runs = [r for r in await elog.run_ids() if "-p" in r]
        return await elog.history(runs[0]) if runs else []
    finally:
        await elog.close()


async def _queue_and_cancel(nats_url: str, source: str) -> None:
    """A second request of the session's run for `source`, published on the pool's stream
    (behind the running one), then its cancel."""
    import msgspec

    from events.log import EventLog

    (first,) = [e for e in await _pool_events(nats_url) if isinstance(e, ev.ProfileRequested)]
    now = time.time()
    queued = msgspec.structs.replace(
        first, **ev.envelope(ev.ProfileRequested, first.run_id, "queued", ts=now), source=source
    )
    cancel = ev.ProfileCancelled(
        **ev.envelope(ev.ProfileCancelled, first.run_id, queued.event_id, ts=now, cause=queued),
        request_id=queued.event_id,
        reason="the test gave up on it before the pool took it",
    )
    elog = await EventLog.connect(nats_url, create=False)
    try:
        await elog.publish(queued)
        await elog.publish(cancel)
    finally:
        await elog.close()


def _count(events: list[ev.Event], kind: type) -> int:
    return sum(isinstance(e, kind) for e in events)


def test_a_cancelled_profile_is_stopped_on_the_pool_and_the_next_is_served(tmp_path: Path) -> None:
    """Three profiles on a pool that times one kernel at a time: a hanging kernel (running
    when its call is cancelled: killed), a second hanging kernel queued behind it on the
    pool's stream and cancelled before the pool took it (answered `cancelled` without ever
    starting a sandboxed process), then an honest one, served at once. The MCP server admits
    one profile per device itself, so the queued request and its cancel are published on the
    pool's stream directly, as another client of the pool (a run, another server) would."""
    root, memory = tmp_path / "runs", tmp_path / "memory"
    with warm_pool(root, memory) as (info, pool):

        async def scenario() -> tuple[float, float, set[int], Any]:
            async with stdio_session(root, "--memory", str(memory)) as c:

                async def hanging_profile(source: str) -> None:
                    await c.call_tool("profile_kernel", {"problem": "cpu_v2/silu", "source": source})

                async with anyio.create_task_group() as tg:
                    tg.start_soon(hanging_profile, HANGS)
                    # the kernel spinning in its sandboxed child on the pool (the compile and
                    # the references come first)
                    with anyio.fail_after(120):
                        while not any(cpu >= 1.0 for cpu in sandbox_children(pool.pid).values()):
                            await anyio.sleep(0.2)
                    seen = set(sandbox_children(pool.pid))
                    await _queue_and_cancel(info.nats_url, QUEUED)  # waits behind the first on the pool
                    tg.cancel_scope.cancel()
                t0 = time.monotonic()
                while (left := seen & set(sandbox_children(pool.pid))) and time.monotonic() - t0 < 30:
                    await anyio.sleep(0.1)
                gone_s = time.monotonic() - t0
                assert not left, f"the cancelled profile's kernel lives on: {left}"
                # until both are answered, no sandboxed process starts: the queued one never runs
                started: set[int] = set()
                with anyio.fail_after(60):
                    while _count(await _pool_events(info.nats_url), ev.KernelProfiled) < 2:
                        started |= set(sandbox_children(pool.pid))
                        await anyio.sleep(0.2)
                t1 = time.monotonic()
                r = await c.call_tool("profile_kernel", {"problem": "cpu_v2/silu", "source": SILU})
                return gone_s, time.monotonic() - t1, started - seen, r

        gone_s, next_s, started, r = anyio.run(scenario)
        assert not r.is_error and r.structured_content["status"] == "passed", text_of(r)
        assert not started, f"the request cancelled in the queue started processes: {started}"
        # gone within seconds (the pool's own limit for a CPU profile is 60 s), and the next
        # profile was not queued behind the hung one
        assert gone_s < 10, gone_s
        assert next_s < 45, next_s
        events = anyio.run(_pool_events, info.nats_url)
    asked = [e for e in events if isinstance(e, ev.ProfileRequested)]
    answered = {e.request_id: e.profile for e in events if isinstance(e, ev.KernelProfiled)}
    cancelled = {e.request_id for e in events if isinstance(e, ev.ProfileCancelled)}
    hung, queued, honest = asked
    assert cancelled == {hung.event_id, queued.event_id}
    assert (hung.source, queued.source) == (HANGS, QUEUED)
    # every request has its one terminal answer: the hung ones' say they were cancelled
    assert sorted(answered) == sorted(e.event_id for e in asked)
    for request in (hung, queued):
        assert (answered[request.event_id].status, answered[request.event_id].reason) == (
            "timeout",
            "cancelled",
        )
    assert answered[honest.event_id].status == "passed"
    view = RunView.from_events(events)  # the stream run still folds
    assert view.run_id == hung.run_id
