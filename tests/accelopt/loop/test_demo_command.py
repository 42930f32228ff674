"""`accelopt demo` (what `make demo` runs) is the real loop on embedded defaults: its own NATS
server, a local Ray, real compiled kernels of the cpu_v2 suite, the offline builtin/tuner
model, and a fresh memory that the first problem fills and the others plan with."""

from __future__ import annotations

import subprocess
import sys

import pytest
from runlog import last_decision

from accelopt import catalog as c
from events.logfile import read_events
from replay.memory_use import memory_use
from replay.render import fmt
from replay.verify import verify


@pytest.mark.timeout(1200)  # two runs; on a loaded 2-core machine the start-up alone can take minutes
def test_demo_fills_the_memory_then_plans_with_it(tmp_path):
    root = tmp_path / "runs"
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "cli.main",
            "demo",
            "--problems",
            "add_rmsnorm_matmul,bmm",
            "--root",
            str(root),
            "--set",
            "search.iterations=1",
            "--set",
            "search.remeasure_rounds=2",
        ],
        capture_output=True,
        text=True,
        timeout=1100,
    )
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    logs = {}
    for log in root.glob("*/log.aolog"):
        events = read_events(log)
        assert (
            events[0].type == "RunStarted"
            and last_decision(events).type == "RunCompleted"
            and verify(events).ok
        )
        assert events[0].config["suite"] == "cpu_v2"
        assert events[0].config["llm"]["default"]["model"] in (None, "builtin/tuner")
        logs[tuple(t.problem.name for t in events[0].targets)] = (log.parent.name, events)
    assert set(logs) == {("add_rmsnorm_matmul",), ("bmm",)}  # the first problem alone, then the others
    first_id, first = logs[("add_rmsnorm_matmul",)]
    second_id, second = logs[("bmm",)]
    assert first[0].ts < second[0].ts
    # both runs used the same fresh memory: what the second received is what the first learnt
    uri = first[0].config["memory"]["uri"]
    assert "demo-memory-" in uri and second[0].config["memory"]["uri"] == uri
    learnt = {e.entry.id for e in first if isinstance(e, c.MemoryEntryAdded)}
    received = {x.entry_id for e in second if isinstance(e, c.MemoryRetrieved) for x in e.entries}
    learnt_second = {e.entry.id for e in second if isinstance(e, c.MemoryEntryAdded)}
    assert received <= learnt | learnt_second
    assert bool(received & learnt) == bool(learnt)  # the planners of the second run got the first's insights
    assert sum(e.type == "KernelProfiled" for e in first) >= 2  # the baseline and candidates
    # the closing table: per problem its run, the re-measured baseline and best and the speedup
    # that is their ratio, the recorded speedup, and the insights received and used
    rows = {}
    for line in out.stdout.splitlines():
        cells = [x.strip() for x in line.split("│")[1:-1]]
        if len(cells) == 9 and cells[0] in ("add_rmsnorm_matmul", "bmm"):
            rows[cells[0]] = cells
    assert set(rows) == {"add_rmsnorm_matmul", "bmm"}, out.stdout
    assert rows["add_rmsnorm_matmul"][1] == f"1 {first_id}" and rows["bmm"][1] == f"2 {second_id}"
    for name, events in (("add_rmsnorm_matmul", first), ("bmm", second)):
        [done] = [e for e in events if isinstance(e, c.ProblemRemeasured)]
        base, best, speedup, recorded = rows[name][2:6]
        assert (base, best) == (fmt.ms(done.baseline.median_ms), fmt.ms(done.best.median_ms))
        assert speedup == fmt.speedup(done.speedup) and recorded == fmt.speedup(done.recorded_speedup)
        # the row adds up: the speedup is the ratio of the two figures beside it
        assert float(speedup[:-1]) == pytest.approx(float(base.split()[0]) / float(best.split()[0]), rel=0.01)
        use = memory_use(events)[name]
        assert rows[name][6:8] == [str(len(use.received)), str(len(use.used))]
    # the first problem's first plan moves its loop order (i-j-k -> i-k-j, many times faster):
    # an insight the second problem's planners receive and follow
    assert learnt and memory_use(second)["bmm"].used
    assert f"plans with the memory: {len(learnt)} insight" in out.stdout
    assert f"accelopt replay {second_id} --verify --root {root}" in out.stdout
