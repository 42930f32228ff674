"""One run, two device kinds: `accelopt run --problems cpu/silu@cpu,triton/rmsnorm_h4096@h100`
on a real nats-server, a real local Ray and real profilers (compiled C on the CPU; the
Triton interpreter for h100 on this GPU-less host, status `unmeasured`), with the offline
builtin/tuner model. Each problem's target, profile requests (subject and field) and
profiles belong to its own device kind; remeasure re-profiles each problem on its device."""

from __future__ import annotations

import asyncio
import contextlib
import io
import re

import msgspec
import pytest
from runlog import last_decision

from accelopt import catalog as c
from actors.runtime.kernel_remeasure import RemeasureRecord
from cli.main import main
from events.codec import decode
from events.log import EventLog
from events.logfile import read_events

# rmsnorm_h4096: the Triton problem with the smallest check workloads (3 and 5 rows of 4096)
DEVICES = {"silu": "cpu", "rmsnorm_h4096": "h100"}
PROBLEMS = "cpu/silu@cpu,triton/rmsnorm_h4096@h100"


async def _profile_subjects(url: str, run_id: str) -> list[tuple[str, c.Event]]:
    elog = await EventLog.connect(url)
    try:
        return [
            (m.subject, decode(m.data, m.subject, m.metadata.sequence.stream))
            async for m in elog.iter_raw(f"accelopt.{run_id}.profile.requested.>")
        ]
    finally:
        await elog.close()


@pytest.fixture(scope="module")
def mixed_run(ray_session, tmp_path_factory):
    from events.server import NatsServer

    tmp = tmp_path_factory.mktemp("mixed-run")
    server = NatsServer(tmp / "nats")
    server.start()
    try:
        root = tmp / "runs"
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            rc = main(
                [
                    "run",
                    "--problems",
                    PROBLEMS,
                    "--preset",
                    "quick",
                    "--root",
                    str(root),
                    "--memory",
                    str(tmp / "memory"),
                    "--nats",
                    server.url,
                    "--timeout",
                    "600",
                    "--set",
                    "search.iterations=1",
                    "--set",
                    "search.beam_width=1",
                    "--set",
                    "search.plans_per_candidate=1",
                    "--set",
                    "profiling.timeout_s=120",
                ]
            )
        (log,) = root.glob("*/log.aolog")
        run_id = log.parent.name
        subjects = asyncio.run(_profile_subjects(server.url, run_id))
    finally:
        server.kill()
    return rc, out.getvalue(), log.parent, read_events(log), subjects


def test_each_problem_runs_on_its_own_device(mixed_run):
    rc, out, _run_dir, events, subjects = mixed_run
    assert rc == 0, out[-3000:]
    assert "optimizing 2 problem(s) of suites cpu, triton on cpu, h100" in out
    for name, device in DEVICES.items():  # the results table's device column
        assert re.search(rf"\b{name}\W+{device}\W", out), out[-3000:]
    started = events[0]
    assert isinstance(started, c.RunStarted)
    assert {t.problem.name: t.device for t in started.targets} == DEVICES
    assert {t.problem.name: t.language for t in started.targets} == {"silu": "c", "rmsnorm_h4096": "triton"}
    assert {k.split(".")[0] for k in started.toolchain} >= {"cpu", "h100"}  # both agents' tools
    completed = last_decision(events)
    assert isinstance(completed, c.RunCompleted) and completed.reason == "completed"

    requests = [e for e in events if isinstance(e, c.ProfileRequested)]
    assert {e.problem for e in requests} == set(DEVICES)
    for e in requests:
        assert e.device == DEVICES[e.problem], e
    # on the stream, each request's subject ends with its problem's device kind
    assert len(subjects) == len(requests)
    for subject, e in subjects:
        assert isinstance(e, c.ProfileRequested)
        assert subject == f"accelopt.{e.run_id}.profile.requested.{DEVICES[e.problem]}"

    profiled = [e for e in events if isinstance(e, c.KernelProfiled)]
    assert {e.kernel_id for e in profiled} == {e.kernel_id for e in requests}
    for e in profiled:
        device = DEVICES[e.problem]
        assert e.device == device and e.profile.device == device and e.worker.startswith(f"{device}-"), e
    statuses = {e.problem: {x.profile.status for x in profiled if x.problem == e.problem} for e in profiled}
    assert "passed" in statuses["silu"]
    assert "unmeasured" in statuses["rmsnorm_h4096"] and "passed" not in statuses["rmsnorm_h4096"]
    # both problems went through their iteration and are in the results, each with its device
    assert {(e.problem, e.iteration) for e in events if isinstance(e, c.IterationCompleted)} >= {
        (n, 1) for n in DEVICES
    }
    assert set(completed.best_kernel_ids) == set(DEVICES)


def test_remeasure_profiles_each_problem_on_its_device(mixed_run, capsys):
    _rc, _out, run_dir, _events, _subjects = mixed_run
    capsys.readouterr()
    assert main(["remeasure", str(run_dir), "--rounds", "1", "--json"]) == 0
    records = [
        msgspec.json.decode(line, type=RemeasureRecord) for line in capsys.readouterr().out.splitlines()
    ]
    assert {r.device: {row.problem for row in r.rows} for r in records} == {
        "cpu": {"silu"},
        "h100": {"rmsnorm_h4096"},
    }
    assert all(r.run_device == r.device for r in records)
    assert sorted(p.name.split("-")[1] for p in run_dir.glob("remeasure-*.json")) == ["cpu", "h100"]
