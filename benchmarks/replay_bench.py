"""Fold speed and time to first report on a synthetic 100,000-event run log.

The log comes from `replay.synthetic`: the real coordinator core driving a simulated world
with the `nki` preset (B=6 N=12 K=2 T=16) on 8 problems, truncated to N events; its mix of
event types is that of a real run (LLM calls with full messages, kernels, profiles, fixes,
memory retrievals and entries, beams, iterations).

- fold: `RunView.from_events` over the decoded events in memory (median of --trials);
- decode + fold: `fold_file` over the exported `.aolog` file (what `accelopt report` and
  `accelopt runs` do), median of --file-trials;
- time to first report: from the exported file to the HTML written (fold + build + write),
  and from decoded events (fold + build).

Usage: python benchmarks/replay_bench.py [--events 100000] [--trials 5] [--file-trials 3]
Target: fold >= 50,000 events/s.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from _common import median, save, synthetic_bench_run

import accelopt  # noqa: F401
from events.codec import encode
from events.logfile import LogWriter
from events.subjects import subject_for
from replay.fold import RunView
from replay.render.report import build_report
from replay.runs import fold_file

TARGET_EVENTS_PER_S = 50_000


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--events", type=int, default=100_000)
    ap.add_argument("--problems", type=int, default=8)
    ap.add_argument("--trials", type=int, default=5)
    ap.add_argument("--file-trials", type=int, default=3)
    ap.add_argument("--no-save", action="store_true")
    args = ap.parse_args()

    t0 = time.perf_counter()
    events = synthetic_bench_run(args.problems, args.events)
    gen_s = time.perf_counter() - t0
    mix = Counter(e.type for e in events)
    print(
        f"synthesized {len(events):,} events in {gen_s:.1f} s: "
        + ", ".join(f"{k} {v}" for k, v in mix.most_common(6))
        + ", ..."
    )

    fold_rates = []
    for i in range(args.trials):
        t0 = time.perf_counter()
        view = RunView.from_events(events)
        s = time.perf_counter() - t0
        fold_rates.append(len(events) / s)
        print(f"fold trial {i}: {s * 1000:.0f} ms, {len(events) / s:,.0f} events/s")
    cut_s = []
    for _ in range(args.trials):
        t0 = time.perf_counter()
        RunView.from_events(events, until_iteration=8)
        cut_s.append(time.perf_counter() - t0)

    t0 = time.perf_counter()
    html = build_report([view])
    build_s = time.perf_counter() - t0

    with tempfile.TemporaryDirectory(prefix="replay-bench-") as tmp:
        path = Path(tmp) / "bench" / "log.aolog"
        with LogWriter(path, "bench") as w:
            for e in events:
                w.write(subject_for(e), encode(e))
        size_mb = path.stat().st_size / 1e6
        print(f"exported log: {size_mb:.1f} MB")
        file_rates, first_report_s = [], []
        for i in range(args.file_trials):
            t0 = time.perf_counter()
            fview = fold_file(path)
            s = time.perf_counter() - t0
            file_rates.append(len(events) / s)
            out = Path(tmp) / "report.html"
            out.write_text(build_report([fview]), encoding="utf-8")
            first_report_s.append(time.perf_counter() - t0)
            print(
                f"decode+fold trial {i}: {s:.2f} s, {len(events) / s:,.0f} events/s; "
                f"first report written after {first_report_s[-1]:.2f} s"
            )
    del events

    figures = {
        "events": view.events,
        "problems": len(view.problems),
        "kernels": len(view.kernels),
        "llm_calls": view.llm_calls,
        "event_mix": dict(mix.most_common()),
        "synthesize_s": round(gen_s, 2),
        "fold_events_per_s_median": round(median(fold_rates)),
        "fold_events_per_s_all": [round(r) for r in fold_rates],
        "fold_until_iteration_8_ms_median": round(median(cut_s) * 1000, 1),
        "report_build_s": round(build_s, 3),
        "report_size_kib": round(len(html) / 1024),
        "log_file_mb": round(size_mb, 1),
        "decode_fold_events_per_s_median": round(median(file_rates)),
        "first_report_from_file_s_median": round(median(first_report_s), 2),
        "first_report_from_events_s": round(view.events / median(fold_rates) + build_s, 3),
        "target_fold_events_per_s": TARGET_EVENTS_PER_S,
        "meets_target": median(fold_rates) >= TARGET_EVENTS_PER_S,
    }
    print(
        f"fold: {figures['fold_events_per_s_median']:,} events/s (target {TARGET_EVENTS_PER_S:,}); "
        f"decode+fold from file: {figures['decode_fold_events_per_s_median']:,} events/s; "
        f"report build {build_s:.2f} s ({figures['report_size_kib']} KiB); "
        f"time to first report from the file: {figures['first_report_from_file_s_median']} s"
    )
    if not args.no_save:
        save("replay_bench", figures)
    return 0 if figures["meets_target"] else 1


if __name__ == "__main__":
    sys.exit(main())
