"""Replay a run's log: fold it into a read model, and verify every decision in it.

Shows the read side's Python API. A run's exported log (`<root>/<run>/log.aolog`, sealed in a
hash chain) is every fact of the run; `RunView.from_events` folds it into what reports show,
and `verify` re-drives the coordinator over the recorded results and checks that each recorded
decision is the one it makes (what `accelopt replay RUN --verify` runs). A log whose
decisions were edited does not verify. Without LOG, a synthetic run is written first (the real
coordinator over a simulated world: `replay/synthetic.py`).

    python examples/replay_log.py [LOG]
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

import msgspec

from accelopt import catalog as ev
from events.logfile import read_events, write_events
from replay.fold import RunView
from replay.synthetic import synthetic_run
from replay.verify import verify


def main(log: str | None = None) -> int:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(log) if log else write_events(Path(tmp) / "log.aolog", synthetic_run(problems=2))
        events = read_events(path)  # a damaged or edited file raises LogIntegrityError here
        view = RunView.from_events(events)
        print(f"{path}: run {view.run_id}, {len(events)} events, status {view.status}")
        for r in view.results():
            speedup = f"{r.reported_speedup:.2f}x" if r.reported_speedup else "-"
            print(f"  {r.problem}@{r.device}: {r.kernels} kernels, best speedup {speedup}")
        report = verify(events)
        print(f"verify: {'ok' if report.ok else 'DIVERGED'}, {report.decisions_checked} decisions re-derived")
        if report.divergence is not None:
            print(f"  {report.divergence.describe()}")
            return 1
        # the same log with one decision changed: the first beam names another best kernel
        i = next((i for i, e in enumerate(events) if isinstance(e, ev.BeamSelected)), None)
        if i is None:
            return 0  # a run that selected no beam (no iteration) has no such decision to edit
        edited = [*events[:i], msgspec.structs.replace(events[i], best_kernel_id="edited"), *events[i + 1 :]]
        bad = verify(edited)
        print(f"verify (one decision edited): {'ok' if bad.ok else 'DIVERGED'}")
        if bad.divergence is not None:
            print(f"  {bad.divergence.describe()}")
    return 1 if bad.ok else 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:]))
