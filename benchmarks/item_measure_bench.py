"""What a campaign's item measurement costs at each run's end (issue 49): a real campaign
(`accelopt campaign run`: real NATS, Ray, compiled and sandboxed CPU kernels, LanceDB, the
offline builtin/tuner model) of `cpu_v2/silu@cpu`, two runs, and from the logs per run:

- `run_s`: the run's own length (its RunStarted to its RunCompleted);
- `run_remeasure_s`: its end-of-problem re-measure inside it (first re-measure request to
  `ProblemRemeasured`), and how many profiles it took;
- `run_end_s`: from the run's RunCompleted to its `CampaignRunFinished`: what the campaign
  spends at the run's end before the device's next run can be scheduled (the item's
  measurement, reading the run's outcome, publishing);
- `item_rounds`, `item_from`: how the item was measured.

    python benchmarks/item_measure_bench.py [--rounds 3] [--runs 2] [--out FILE]

Prints one JSON object (and writes it to --out). Minutes on a loaded 2-core machine.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def spec(rounds: int, runs: int) -> dict:
    return {
        "name": "imcost",
        "problems": ["cpu_v2/silu@cpu"],
        "devices": {
            "cpu": {
                "profilers": 1,
                "preset": "quick",
                "set": [
                    "search.iterations=1",
                    "search.beam_width=1",
                    "search.plans_per_candidate=1",
                    f"search.remeasure_rounds={rounds}",
                ],
            }
        },
        "set": ["profiling.timeout_s=300"],
        "stop": {"max_runs": runs, "plateau_runs": runs + 5},
    }


def per_run(root: Path, cid: str) -> list[dict]:
    from accelopt import catalog as c
    from events.logfile import read_events

    camp = read_events(root / "campaigns" / cid / "log.aolog")
    finished = {e.run: e for e in camp if isinstance(e, c.CampaignRunFinished)}
    measured = {e.run: e for e in camp if isinstance(e, c.CampaignItemMeasured)}
    out = []
    for s in (e for e in camp if isinstance(e, c.CampaignRunScheduled)):
        events = read_events(root / s.run / "log.aolog")
        started = next(e for e in events if isinstance(e, c.RunStarted))
        done = next((e for e in events if isinstance(e, (c.RunCompleted, c.RunFailed))), None)
        rm_reqs = [e for e in events if isinstance(e, c.ProfileRequested) and e.purpose == "remeasure"]
        rm = next((e for e in events if isinstance(e, c.ProblemRemeasured)), None)
        f, m = finished.get(s.run), measured.get(s.run)
        row = {
            "run": s.run,
            "starts_from_baseline": s.start_run is None,
            "run_s": round(done.ts - started.ts, 1) if done else None,
            "run_remeasure_s": round(rm.ts - rm_reqs[0].ts, 1) if rm and rm_reqs else None,
            "run_remeasure_profiles": len(rm_reqs),
            "run_end_s": round(f.ts - done.ts, 1) if f and done else None,
            "item_method": m.method if m else None,
            "item_rounds": m.rounds if m else None,
            "item_from_run_remeasure": bool(m.run_remeasure) if m else None,
            "item_sides": [k for k in ("origin", "start", "candidate") if m and getattr(m, k) is not None],
        }
        out.append(row)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--runs", type=int, default=2)
    ap.add_argument("--out", default="")
    ap.add_argument("--keep", default="", help="a folder to keep the campaign's root in")
    a = ap.parse_args()
    tmp = Path(a.keep or tempfile.mkdtemp(prefix="item-measure-bench-"))
    tmp.mkdir(parents=True, exist_ok=True)
    root = tmp / "runs"
    sp = tmp / "c.yaml"
    sp.write_text(json.dumps(spec(a.rounds, a.runs)))
    env = {k: v for k, v in os.environ.items() if k != "ACCELOPT_MEMORY"}
    env["ACCELOPT_LOG_LEVEL"] = "ERROR"
    load0 = os.getloadavg()[0]
    t0 = time.time()
    r = subprocess.run(
        [sys.executable, "-m", "cli.main", "campaign", "run", str(sp), "--id", "imcost", "--root", str(root)],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
    )
    wall = time.time() - t0
    server = root / ".nats" / "server.json"
    if server.exists():  # the root's embedded nats-server
        import contextlib
        import signal

        with contextlib.suppress(Exception):
            os.kill(json.loads(server.read_text())["pid"], signal.SIGTERM)
    if r.returncode != 0:
        print(r.stdout[-3000:] + r.stderr[-3000:], file=sys.stderr)
        return 1
    out = {
        "rounds": a.rounds,
        "campaign_s": round(wall, 1),
        "load_avg_1min": [round(load0, 1), round(os.getloadavg()[0], 1)],
        "runs": per_run(root, "imcost"),
        "notes": [ln for ln in r.stdout.splitlines() if " run " in ln and ("ended" in ln or "over" in ln)],
    }
    text = json.dumps(out, indent=1)
    print(text)
    if a.out:
        Path(a.out).write_text(text + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
