"""One queue for the device (issue 52), through `accelopt mcp --http` and the real `mcp`
client: each client session's limits (one over its limit refused with a one-line tool error,
the other still served), turns between sessions under contention (round robin, not arrival
order), the queue's state where `accelopt campaign status` reads it, and eight sessions
profiling at once with every verdict in the session log exactly once. Real server, real
judge, real kernels (cpu_v2/silu)."""

from __future__ import annotations

import json
import os
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import anyio
import httpx2
import pytest
from mcp_session import ACCELOPT, REPO, free_port, http_session, text_of, warm_pool

from accelopt import catalog as ev
from accelopt.device_queue import QUEUE_GLOB
from events.logfile import read_events

pytestmark = pytest.mark.timeout(900)
SILU = (REPO / "suites" / "cpu_v2" / "silu" / "baseline.c").read_text()
SEGFAULT = "void kernel(const float* x, float* out) { *(volatile int*)0 = 1; }\n"


@contextmanager
def server(root: Path, *flags: str) -> Iterator[str]:
    """`accelopt mcp --http` on loopback with `flags`, until it answers; its URL."""
    port = free_port()
    env = {k: v for k, v in os.environ.items() if k != "ACCELOPT_MCP_TOKEN"}
    proc = subprocess.Popen(
        [ACCELOPT, "mcp", "--root", str(root), "--http", f"127.0.0.1:{port}", *flags], cwd=REPO, env=env
    )
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                httpx2.get(f"http://127.0.0.1:{port}/mcp", timeout=2)
                break
            except httpx2.TransportError:
                assert proc.poll() is None, "the server exited"
                assert time.monotonic() < deadline, "the server did not listen"
                time.sleep(0.2)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        proc.terminate()
        proc.wait(60)


def queue_record(root: Path) -> dict:
    (path,) = root.glob(QUEUE_GLOB)
    return json.loads(path.read_text())


def session_events(root: Path) -> list[ev.Event]:
    (log,) = [p / "log.aolog" for p in root.iterdir() if (p / "log.aolog").exists()]
    return read_events(log)


def profile(source: str = SILU) -> dict:
    return {"problem": "cpu_v2/silu", "source": source}


def test_limits_refuse_one_session_and_serve_the_other(tmp_path: Path) -> None:
    root = tmp_path / "runs"
    # no real profile (a compile, a run, the timing) takes under 0.2 s of the device
    with server(root, "--session-profiles", "1", "--session-device-s", "0.2") as url:
        got: dict[str, list] = {"greedy": [], "other": []}

        async def greedy() -> None:
            async with http_session(url, None, name="greedy") as c:
                async with anyio.create_task_group() as tg:  # two at once: its limit is one

                    async def one() -> None:
                        got["greedy"].append(await c.call_tool("profile_kernel", profile()))

                    tg.start_soon(one)
                    tg.start_soon(one)
                # its first profile spent its budget: the next one is refused
                got["greedy"].append(await c.call_tool("profile_kernel", profile()))

        async def other() -> None:
            async with http_session(url, None, name="other") as c:
                got["other"].append(await c.call_tool("profile_kernel", profile()))

        async def scenario() -> None:
            async with anyio.create_task_group() as tg:
                tg.start_soon(greedy)
                tg.start_soon(other)

        anyio.run(scenario)
        record = queue_record(root)
    first, second, third = got["greedy"]
    served = [r for r in (first, second) if not r.is_error]
    (at_once,) = [r for r in (first, second) if r.is_error]
    assert len(served) == 1 and served[0].structured_content["status"] == "passed"
    line = text_of(at_once)
    assert "\n" not in line and "is at its limit of 1 profiles running or waiting: wait for one" in line, line
    assert third.is_error and "of its 0.2 device-seconds: no more profiles" in text_of(third)
    (theirs,) = got["other"]
    assert not theirs.is_error and theirs.structured_content["status"] == "passed"  # still served
    sessions = {s["session"].partition(" #")[0]: s for s in record["state"]["sessions"]}
    assert sessions["greedy 1.0"]["refused"] == 2 and sessions["other 1.0"]["refused"] == 0
    assert sessions["greedy 1.0"]["device_s"] > 0.2 and record["backends"] == {"cpu": "this server's judge"}
    # only the verdicts given are in the log: two, each once
    profiled = [e for e in session_events(root) if isinstance(e, ev.KernelProfiled)]
    assert sorted(e.event_id for e in profiled) == sorted(
        r.structured_content["event_id"] for r in (served[0], theirs)
    )


def test_turns_go_round_robin_between_sessions_and_campaign_status_shows_the_queue(tmp_path: Path) -> None:
    root = tmp_path / "runs"
    with server(root) as url:
        order: list[str] = []

        async def flood() -> None:  # four at once: one runs, three wait
            async with http_session(url, None, name="flood") as c:

                async def one() -> None:
                    r = await c.call_tool("profile_kernel", profile())
                    assert not r.is_error, text_of(r)
                    order.append("flood")

                async with anyio.create_task_group() as tg:
                    for _ in range(4):
                        tg.start_soon(one)

        async def late() -> None:  # one, once the flood's three wait
            deadline = time.monotonic() + 300
            while True:
                sessions = queue_record(root)["state"]["sessions"]
                if any(s["waiting"] == 3 for s in sessions):
                    break
                assert time.monotonic() < deadline, sessions
                await anyio.sleep(0.05)
            status = subprocess.run(
                [ACCELOPT, "campaign", "status", "--root", str(root)],
                capture_output=True,
                text=True,
                cwd=REPO,
                timeout=120,
            )
            got_status.append(status.stdout)
            async with http_session(url, None, name="late") as c:
                r = await c.call_tool("profile_kernel", profile())
                assert not r.is_error, text_of(r)
                order.append("late")

        got_status: list[str] = []

        async def scenario() -> None:
            async with anyio.create_task_group() as tg:
                tg.start_soon(flood)
                tg.start_soon(late)

        anyio.run(scenario)
    # arrival order would serve the flood's four first; the late session gets the next turn
    assert order[:2] == ["flood", "late"], order
    (status,) = got_status
    (line,) = [ln for ln in status.splitlines() if ln.startswith("device queue of mcp")]
    assert "cpu: running flood 1.0 #" in line and "3 waiting (this server's judge)" in line, line
    assert "flood 1.0 #" in line and "(1 running, 3 waiting)" in line, line
    assert not list(root.glob(QUEUE_GLOB))  # removed at its end
    # beside the runs' folders, not one of them: the root holds the session's folder only
    sessions = {p.parent.name for p in root.glob("*/log.aolog")}
    assert {p.name for p in root.iterdir() if p.is_dir()} <= {"memory", *sessions}


def test_eight_sessions_profile_at_once_and_every_verdict_is_logged_once(tmp_path: Path) -> None:
    root = tmp_path / "runs"
    with server(root) as url:
        answers: dict[str, list[str]] = {}

        async def agent(i: int) -> None:
            name = f"agent-{i}"
            async with http_session(url, None, name=name) as c:
                for source in (SILU, SEGFAULT):
                    r = await c.call_tool("profile_kernel", profile(source))
                    assert not r.is_error, text_of(r)
                    answers.setdefault(name, []).append(r.structured_content["event_id"])

        async def scenario() -> None:
            async with anyio.create_task_group() as tg:
                for i in range(8):
                    tg.start_soon(agent, i)

        anyio.run(scenario)
        record = queue_record(root)
    events = session_events(root)
    profiled = [e for e in events if isinstance(e, ev.KernelProfiled)]
    proposed = [e for e in events if isinstance(e, ev.KernelProposed)]
    ids = [e.event_id for e in events]
    assert len(ids) == len(set(ids))  # nothing twice
    given = sorted(eid for eids in answers.values() for eid in eids)
    assert len(given) == 16 and sorted(e.event_id for e in profiled) == given  # nothing lost
    assert len(proposed) == 16 and {e.request_id for e in proposed} == {e.request_id for e in profiled}
    by_agent: dict[str, list[str]] = {}
    for e in profiled:
        by_agent.setdefault(e.worker.rpartition(" for ")[2], []).append(e.profile.status)
    assert by_agent == {f"agent-{i} 1.0": ["passed", "runtime_error"] for i in range(8)}
    (cpu,) = record["state"]["devices"]
    assert cpu["running"] == [] and cpu["waiting"] == 0
    assert sorted(s["device_s"] > 0 for s in record["state"]["sessions"]) == [True] * 8


@pytest.mark.timeout(900)
def test_profiles_go_to_the_warm_pool_of_the_root_when_one_runs(tmp_path: Path) -> None:
    """`accelopt up` on the root: the server's profile and compare are ProfileRequested on the
    pool's log, served by the pool's profiler (the one every run of the root uses). Real
    nats-server, Ray and CPU profiler."""
    from events.log import EventLog

    root, memory = tmp_path / "runs", tmp_path / "memory"
    with warm_pool(root, memory) as (info, _):
        with server(root, "--memory", str(memory)) as url:

            async def scenario() -> tuple:
                async with http_session(url, None, name="pooled") as c:
                    p = await c.call_tool("profile_kernel", profile())
                    bad = await c.call_tool("profile_kernel", profile(SEGFAULT))
                    fast = SILU.replace("#define EXP_IMPL 1", "#define EXP_IMPL 2")
                    cmp = await c.call_tool(
                        "compare_kernels",
                        {"problem": "cpu_v2/silu", "slow_source": SILU, "fast_source": fast, "rounds": 1},
                    )
                    return p, bad, cmp

            p, bad, cmp = anyio.run(scenario)
            record = queue_record(root)
        for r in (p, bad, cmp):
            assert not r.is_error, text_of(r)
        assert (
            p.structured_content["status"] == "passed" and bad.structured_content["status"] == "runtime_error"
        )
        assert (
            cmp.structured_content["slow"]["status"] == "passed"
            and len(cmp.structured_content["slow"]["rounds_ms"]) == 1
        )
        assert record["backends"] == {"cpu": f"the pool of accelopt up (pid {info.pid})"}

        async def on_the_pool() -> dict[str, list]:
            elog = await EventLog.connect(info.nats_url, create=False)
            try:
                runs = [r for r in await elog.run_ids() if r.startswith(record["server"])]
                return {r: await elog.history(r) for r in runs}
            finally:
                await elog.close()

        runs = anyio.run(on_the_pool)
    # one stream run for cpu_v2/silu on cpu: the profiles (2) and the compare's rounds (2), each
    # request answered once by the pool's profiler, closed when the server ended
    ((run_id, events),) = runs.items()
    assert run_id == record["server"] + "-p1"
    asked = [e for e in events if isinstance(e, ev.ProfileRequested)]
    answered = [e for e in events if isinstance(e, ev.KernelProfiled)]
    assert sorted(e.purpose for e in asked) == ["remeasure", "remeasure", "reverify", "reverify"]
    assert sorted(e.request_id for e in answered) == sorted(e.event_id for e in asked)
    assert all(e.worker.startswith("cpu") for e in answered) and isinstance(events[-1], ev.RunCompleted)
    logged = {e.profile.status for e in session_events(root) if isinstance(e, ev.KernelProfiled)}
    assert logged == {"passed", "runtime_error"}
