"""Replay, ablation and resume on a real recorded run (subprocess CLI runs: real NATS, real
Ray, real compiled kernels; the offline builtin/tuner model, as no LLM API is reachable).

- replay --verify passes on the recording and catches an altered event;
- an ablation with an unchanged config makes zero new LLM calls and profiles nothing anew;
- kill -9 of the CLI mid-run leaves no embedded nats-server behind and the run listed as
  `interrupted` with the command that resumes it; that `accelopt resume` gives the same set of
  kernels as the uninterrupted recording, and leaves no server behind either.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import msgspec
import pytest
from loop_cli import ACCELOPT, cli, kill_embedded_server, run_dirs
from runlog import last_decision

from accelopt import catalog as c
from events.log import EventLog
from events.logfile import read_events
from events.runsource import load_events, running_server_url
from events.subjects import role_filter
from replay.recording import served_counts
from replay.verify import verify


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    root = tmp_path_factory.mktemp("abl") / "runs"
    root.mkdir()
    # the ablations inherit the recording's settings: no end-of-problem re-measure in any of
    # them (timed anew by design, it is what an unchanged ablation would not serve)
    r = cli(
        "run",
        "--suite",
        "cpu",
        "--problems",
        "matmul",
        "--preset",
        "quick",
        "--set",
        "search.iterations=3",
        "--set",
        "search.plans_per_candidate=3",
        "--set",
        "search.remeasure_rounds=0",
        root=root,
    )
    assert r.returncode == 0, r.stdout + r.stderr
    (run_id,) = run_dirs(root)
    yield root, run_id
    kill_embedded_server(root)


def test_replay_verify_passes_and_catches_an_altered_event(recorded):
    root, run_id = recorded
    r = cli("replay", run_id, "--verify", root=root)
    assert r.returncode == 0 and "verified" in r.stdout, r.stdout + r.stderr
    events = read_events(root / run_id / "log.aolog")
    assert verify(events).ok
    i = next(
        i
        for i, e in enumerate(events)
        if isinstance(e, c.KernelProfiled)
        and e.profile.status == "passed"
        and e.profile.latency
        and e.request_id
        and i > len(events) // 3
    )
    prof = events[i].profile
    bad = msgspec.structs.replace(prof, status="incorrect", latency=None)
    altered = [*events[:i], msgspec.structs.replace(events[i], profile=bad), *events[i + 1 :]]
    report = verify(altered)
    assert not report.ok and report.divergence.position > i + 1


def test_unchanged_ablation_makes_no_new_llm_calls(recorded):
    root, run_id = recorded
    before = run_dirs(root)
    r = cli("ablate", run_id, root=root)
    assert r.returncode == 0, r.stdout + r.stderr
    (new,) = run_dirs(root) - before
    events = read_events(root / new / "log.aolog")
    started = events[0]
    assert isinstance(started, c.RunStarted) and started.parent_run == run_id
    s = served_counts(events)
    assert s.llm_calls > 0 and s.llm_served == s.llm_calls
    assert s.profiles > 0 and s.profiles_served == s.profiles
    assert "0 made anew" in r.stdout
    original = read_events(root / run_id / "log.aolog")
    assert _kernel_sources(events) == _kernel_sources(original)


def test_kill_9_mid_run_then_resume_gives_the_same_kernels(recorded, tmp_path):
    root, run_id = recorded
    new = _killed_mid_run(root, run_id, tmp_path)
    r = cli("runs", "--json", root=root)
    assert r.returncode == 0, r.stdout + r.stderr
    row = next(json.loads(line) for line in r.stdout.splitlines() if json.loads(line)["run_id"] == new)
    assert row["status"] == "interrupted" and row["resume"] == f"accelopt resume {new} --root {root}", row
    mid = load_events(
        new, root, prefer_stream=True
    )  # starts the root's server to read the stream, then stops it
    assert not any(isinstance(e, c.RunCompleted) for e in mid), "killed too late: the run had finished"
    r = cli("resume", new, root=root, timeout=400)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "resuming" in r.stdout
    assert running_server_url(root) is None  # nothing left running after the resume either
    events = read_events(root / new / "log.aolog")
    assert isinstance(last_decision(events), c.RunCompleted)
    assert verify(events).ok
    original = read_events(root / run_id / "log.aolog")
    assert _kernel_sources(events) == _kernel_sources(original)
    # nothing was counted twice: one profile per kernel, one RunStarted
    profiled_ids = [e.kernel_id for e in events if isinstance(e, c.KernelProfiled)]
    assert len(profiled_ids) == len(set(profiled_ids))
    assert sum(isinstance(e, c.RunStarted) for e in events) == 1


def _killed_mid_run(root: Path, run_id: str, tmp_path: Path, attempts: int = 3) -> str:
    """An unchanged ablation of `run_id` killed (-9, the CLI's whole session) once its first
    profile is on the log; its id. The served run lasts about a second once its actors are up,
    so a watcher can miss it whole on a loaded host: an attempt the CLI completed before the
    watcher saw a profile says nothing about resuming and is made again under a new id (up to
    `attempts`); any other outcome fails at once, with the CLI's stderr."""
    env = {**os.environ, "ACCELOPT_LOG_LEVEL": "ERROR"}
    missed = []
    for attempt in range(attempts):
        new = f"resumed-run-{attempt}"
        stderr = tmp_path / f"ablate-{attempt}.stderr"
        with stderr.open("wb") as err:
            proc = subprocess.Popen(
                [*ACCELOPT, "ablate", run_id, "--run-id", new, "--root", str(root)],
                stdout=subprocess.DEVNULL,
                stderr=err,
                env=env,
                start_new_session=True,
            )
        started = time.monotonic()
        # followed live, as events are published: a poll of the log every so often can miss
        # the whole of the served run
        watch = asyncio.run(_first_profile(root, new, proc, timeout_s=300))
        if watch.seen:
            server_pid = json.loads((root / ".nats" / "server.json").read_text())["pid"]
            # the CLI and every Ray process it started (not the NATS server: its own session)
            kill_session(proc.pid)
            proc.wait(10)
            _wait_gone(server_pid)  # the embedded server went with the CLI that started it
            return new
        kill_session(proc.pid)
        code = proc.poll()
        log = root / new / "log.aolog"
        events = read_events(log) if log.exists() else []
        diagnosis = (
            f"attempt {attempt}: CLI exit {code} after {time.monotonic() - started:.1f} s; watcher "
            f"connected after {watch.connected_after_s} s ({watch.connects} connect tries); the "
            f"run's log: {len(events)} events, {sum(isinstance(e, c.KernelProfiled) for e in events)} "
            "profiles"
        )
        if not (code == 0 and any(isinstance(e, c.RunCompleted) for e in events)):
            pytest.fail(
                f"the run did not get going ({diagnosis}); its stderr:\n"
                + stderr.read_text(errors="replace")[-4000:]
            )
        missed.append(diagnosis)
    pytest.fail("every attempt completed before its first profile was seen: " + "; ".join(missed))


def _wait_gone(pid: int, timeout_s: float = 15.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            data = Path(f"/proc/{pid}/stat").read_bytes()
        except OSError:
            return
        if data[data.rfind(b")") + 2 :][:1] in (b"Z", b"X"):
            return
        time.sleep(0.05)
    raise AssertionError(f"process {pid} outlived its run")


def kill_session(sid: int) -> None:
    """SIGKILL every process of a session, as a crash of the whole machine's CLI side would.
    (Ray's workers run in their own process groups, so killpg is not enough.)"""
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[3]) == sid:  # field 6 of stat: session id
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(stat.parent.name), signal.SIGKILL)


@dataclass
class _Watch:
    seen: bool = False  # the run's first KernelProfiled was seen before the CLI exited
    connects: int = 0  # tries to connect to the root's server
    connected_after_s: float | None = None  # from the watch's start to its first connection


async def _first_profile(root: Path, run_id: str, proc: subprocess.Popen, timeout_s: float) -> _Watch:
    """Whether the run's first KernelProfiled came within `timeout_s`, seen as it is published:
    the log of the root's embedded server, once the CLI has started it. Not seen as soon as
    the CLI has exited; the whole wait is bounded (a follow whose server went away retries
    forever)."""
    info = root / ".nats" / "server.json"
    result = _Watch()
    began = time.monotonic()

    async def watch() -> None:
        while proc.poll() is None:
            result.connects += 1
            try:
                # a short connect: a server.json left by a server that is gone must not hold
                # the watcher past the served run
                elog = await EventLog.connect(
                    json.loads(info.read_text())["url"], create=False, connect_timeout=1.0
                )
            except (OSError, ValueError, ConnectionError):
                await asyncio.sleep(0.05)  # not started yet
                continue
            if result.connected_after_s is None:
                result.connected_after_s = round(time.monotonic() - began, 2)
            try:
                async for _, e, _ in elog.follow(role_filter("KernelProfiled", run_id), idle_timeout=0.2):
                    if isinstance(e, c.KernelProfiled):
                        result.seen = True
                        return
                    if proc.poll() is not None:
                        return
            finally:
                await elog.close()

    # raced against the CLI's exit: with its server gone, a follow retries without yielding
    task = asyncio.create_task(watch())
    deadline = time.monotonic() + timeout_s
    while not task.done() and proc.poll() is None and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(task, 5.0 if proc.poll() is not None else 0.01)
    return result


def _kernel_sources(events) -> set[tuple[str, int, str]]:
    return {(e.problem, e.iteration, e.source) for e in events if isinstance(e, c.KernelProposed)}
