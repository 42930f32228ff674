"""The loop on emulated NKI: `accelopt run --suite nki_tune --device trn1` on this machine (no
Trainium, no Neuron SDK) with a real nats-server, a real local Ray and the real Neuron agent in
its `emulate` mode, with the offline builtin/tuner model moving the kernels' NKI constants.
Kernels are checked in the emulator and ranked by the trn1 cost model's ESTIMATED latency;
nothing is reported as measured; estimated pairs are summarized and marked in the memory; the
run replays and verifies."""

from __future__ import annotations

import contextlib
import io

import pytest
from runlog import last_decision

from accelopt import catalog as c
from accelopt.records import is_estimated
from cli.main import main
from events.logfile import read_events


@pytest.fixture(scope="module")
def nki_run(ray_session, tmp_path_factory):
    from events.server import NatsServer

    tmp = tmp_path_factory.mktemp("nki-run")
    server = NatsServer(tmp / "nats")
    server.start()
    try:
        root = tmp / "runs"
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            rc = main(
                [
                    "run",
                    "--suite",
                    "nki_tune",
                    "--device",
                    "trn1",
                    "--preset",
                    "quick",
                    "--root",
                    str(root),
                    "--memory",
                    str(tmp / "memory"),
                    "--nats",
                    server.url,
                    "--timeout",
                    "900",
                    "--set",
                    "search.iterations=2",
                    "--set",
                    "search.beam_width=1",
                    "--set",
                    "profiling.timeout_s=300",
                ]
            )
        (log,) = root.glob("*/log.aolog")
    finally:
        server.kill()
    return rc, out.getvalue(), log.parent, read_events(log)


def test_the_loop_runs_on_estimates_and_finds_a_faster_kernel(nki_run) -> None:
    rc, out, _run_dir, events = nki_run
    assert rc == 0, out[-3000:]
    completed = last_decision(events)
    assert isinstance(completed, c.RunCompleted) and completed.reason == "completed"
    profiled = [e for e in events if isinstance(e, c.KernelProfiled)]
    assert profiled and all(e.profile.device == "trn1" for e in profiled)
    ok = [e.profile for e in profiled if e.profile.status == "unmeasured"]
    assert ok and all(p.estimate is not None and p.latency is None and p.peak_fraction is None for p in ok)
    assert not any(e.profile.status == "passed" for e in profiled)  # nothing was measured
    assert all(e.profile.toolchain.get("mode") == "emulate" for e in profiled)
    for problem in ("silu", "matmul"):
        its = [e for e in events if isinstance(e, c.IterationCompleted) and e.problem == problem]
        base, last = its[0], its[-1]
        assert base.best_latency_ms is None and last.best_latency_ms is None  # estimates stay apart
        assert last.best_estimated_ms is not None and last.best_estimated_ms < base.best_estimated_ms, problem
    assert "est. " in out and "ESTIMATED" in out  # the results table marks its figures


def test_estimated_pairs_are_summarized_and_marked(nki_run) -> None:
    _rc, _out, _run_dir, events = nki_run
    summaries = [e for e in events if isinstance(e, c.SummaryRequested)]
    assert summaries and all(e.estimated for e in summaries)
    entries = [e.entry for e in events if isinstance(e, c.MemoryEntryAdded)]
    assert entries and all(is_estimated(e.text) for e in entries)
    asked = [e for e in events if isinstance(e, c.LLMCallCompleted) and e.role == "summarizer"]
    assert asked and all("ESTIMATED" in e.messages[-1].content for e in asked)


def test_the_run_replays_and_verifies(nki_run, capsys) -> None:
    _rc, _out, run_dir, _events = nki_run
    capsys.readouterr()
    assert main(["replay", run_dir.name, "--root", str(run_dir.parent), "--verify"]) == 0
    assert "verified:" in capsys.readouterr().out
