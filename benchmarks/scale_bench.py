"""Fleet scale by simulation: one run per point on the simulated device (`sim`), sweeping the
number of concurrent simulated profilers (default 1, 4, 16, 64, 256).

Real Ray actors, a real nats-server (JetStream), the real coordinator, the offline
`builtin/tuner` model; only the device is simulated (profiles sleep `--profile-s` without
CPU, hardware_agents/sim/). A Ray actor per profiler would not fit 256 times in memory, so
all profilers of a point live in ONE profiler host process with `devices.sim.concurrency=C`,
the way one `accelopt worker --count N` host would hold N devices; the script measures
that process's RSS (and what each extra simulated profiler adds to it).

The work grows with C (`--problems-per-profiler` problems per profiler slot, at least 1
problem, each B x N candidates per iteration), so the queue holds more than C requests
and the ideal throughput is C / mean profile duration. Per point it reports, from the
run's exported log and the driver's own view of the stream:

- profile throughput (non-cached profiles / s, over the window from the first
  ProfileRequested to the last KernelProfiled) and its ratio to the ideal; and the same
  over the time when at least C requests were outstanding ("saturated": the profilers
  alone set the pace, so this measures the fleet machinery, not the supply of work);
- coordinator decisions / s (events the coordinator publishes: requests, proposals it
  forwards, iteration and beam events) over the same window;
- event-log publish rate (events on the log / s) and consume rate (events the driver
  received / s) with the driver's lag (receive time - event ts) p50/p99;
- end-to-end latency ProfileRequested.ts -> KernelProfiled.ts p50/p99, and the same minus
  the profile's own duration (queueing + transport);
- RSS of the profiler host and of every AccelOpt actor process.

The first bottleneck is named from these figures: the profilers (utilisation ~ 100%), the
supply of work (requests waiting upstream: LLM roles, coordinator), or the event log.

The defaults give every point the same work per profiler (one problem each; 1 + 4 + 8 + 8
profiles per problem over three iterations of beam 2 x 4 plans), so the window is ~21
profile durations at every C and the run's ramp-up and tail weigh the same at every point.

Usage: python benchmarks/scale_bench.py [--points 1,4,16,64,256] [--profile-s 5] [--iterations 3]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from _common import load_search, median, percentile, save, sim_device

import accelopt  # noqa: F401  (offline defaults)

# events the coordinator publishes: each is one decision of its state machine
COORDINATOR_EVENTS = {
    "IterationStarted",
    "BeamSelected",
    "IterationCompleted",
    "PlanRequested",
    "ImplementationRequested",
    "FixRequested",
    "SummaryRequested",
    "ProfileRequested",
    "MemoryRetrieved",
    "ProblemCompleted",
    "ProblemRemeasured",
    "RunCompleted",
}


def actor_processes(known: dict[str, int]) -> dict[str, int]:
    """Named AccelOpt actors not in `known` -> pid (asked of each actor, once it is built)."""
    import ray

    out: dict[str, int] = {}
    for name in ray.util.list_named_actors():
        if not name.startswith("accelopt-") or name in known:
            continue
        try:
            handle = ray.get_actor(name)
            ref: ray.ObjectRef[int] = handle.__ray_call__.remote(lambda self: os.getpid())
            out[name] = ray.get(ref, timeout=2)
        except Exception:
            continue
    return out


class RssSampler:
    """Samples the RSS of the run's actor processes every `period_s` in a thread."""

    def __init__(self, period_s: float = 1.0) -> None:
        self.period_s = period_s
        self.peak: dict[str, int] = {}
        self.samples: list[tuple[float, dict[str, int]]] = []
        self._stop = threading.Event()
        self._pids: dict[str, int] = {}
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def start(self) -> None:
        self._thread.start()

    def _loop(self) -> None:
        import psutil

        while not self._stop.wait(self.period_s):
            try:  # the run's actors, as they come up
                self._pids.update(actor_processes(self._pids))
            except Exception:
                pass
            now = {}
            for name, pid in self._pids.items():
                try:
                    now[name] = psutil.Process(pid).memory_info().rss
                except psutil.Error:
                    continue
            self.samples.append((time.time(), now))
            for name, rss in now.items():
                self.peak[name] = max(self.peak.get(name, 0), rss)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)


def role_of(actor_name: str) -> str:
    """`accelopt-profiler-sim-0-abc123` -> `profiler-sim-0`."""
    return actor_name.removeprefix("accelopt-").rsplit("-", 1)[0]


def run_point(c: int, args: argparse.Namespace, nats_url: str, tmp: Path) -> dict:
    import suites
    from accelopt.config import build_config
    from actors.runtime.session import SessionOptions, run_session
    from events.logfile import read_events
    from hardware_agents.sim.suite import write_suite

    n_problems = max(1, round(c * args.problems_per_profiler))
    suite = write_suite(tmp / f"suite-{c}", n_problems)
    cfg = build_config(
        overrides=[
            f"root={tmp / 'runs'}",
            f"suite={suite}",
            "device=sim",
            f"seed={c}",
            *load_search(args.beam, args.plans, args.iterations),
            f"memory.enabled={'true' if args.memory else 'false'}",
            f"memory.uri={tmp / 'memory'}",
            *sim_device(c, args.profile_s, args.pass_rate, c),
            f"limits.profiles_inflight_per_device={max(8, 2 * c)}",
            f"limits.llm_inflight_per_role={max(16, 2 * c)}",
            f"llm.default.concurrency={args.llm_concurrency}",
        ]
    )
    problems = suites.load_suite(str(suite))
    received: list[tuple[float, float]] = []  # (receive time, event ts) at the driver

    def on_event(event, _view) -> None:
        received.append((time.time(), event.ts))

    sampler = RssSampler()
    sampler.start()
    t0 = time.time()
    try:
        outcome = run_session(
            cfg,
            problems,
            SessionOptions(nats_url=nats_url, on_event=on_event, timeout_s=args.timeout, log_level="ERROR"),
        )
    finally:
        sampler.stop()
    wall = time.time() - t0
    events = read_events(outcome.run_dir / "log.aolog")
    started_ts = events[0].ts
    requests = {e.event_id: e for e in events if e.type == "ProfileRequested"}
    results = [e for e in events if e.type == "KernelProfiled" and e.request_id in requests]
    fresh = [e for e in results if not e.profile.counters.get("cached") and e.served_from is None]
    win_start = min(e.ts for e in requests.values())
    win_end = max(e.ts for e in results)
    window = max(win_end - win_start, 1e-9)
    durations = [e.profile.wall_s for e in fresh]
    mean_duration = sum(durations) / len(durations)
    throughput = len(fresh) / window
    ideal = c / mean_duration
    e2e = [e.ts - requests[e.request_id].ts for e in results]
    overhead = [e.ts - requests[e.request_id].ts - e.profile.wall_s for e in fresh]
    coordinator = [e for e in events if e.type in COORDINATOR_EVENTS and win_start <= e.ts <= win_end]
    in_window = [e for e in events if win_start <= e.ts <= win_end]
    lags = [r - ts for r, ts in received]
    consume_window = max(max(r for r, _ in received) - min(r for r, _ in received), 1e-9)
    # requests waiting for a profiler: how often the queue held at least C requests
    timeline = sorted([(e.ts, 1) for e in requests.values()] + [(e.ts, -1) for e in results])
    outstanding, covered, last_ts, at_c, done_at_c = 0, 0.0, win_start, 0.0, 0
    for ts, d in timeline:
        if outstanding >= c:
            at_c += ts - last_ts
            done_at_c += d < 0
        covered += ts - last_ts
        outstanding += d
        last_ts = ts
    # while at least C requests were waiting or running, the profilers alone set the pace:
    # throughput then measures the fleet machinery (fetch, threads, publish, ack) against ideal
    saturated = done_at_c / at_c if at_c > 1e-3 else None
    profiler_rss = {role_of(n): v for n, v in sampler.peak.items() if "profiler" in n}
    point = {
        "profilers": c,
        "problems": n_problems,
        "completed": bool(outcome.view.completed),
        "timed_out": outcome.timed_out,
        "run_wall_s": round(wall, 2),
        "start_to_first_request_s": round(win_start - started_ts, 2),
        "window_s": round(window, 2),
        "events": len(events),
        "profiles": len(results),
        "profiles_fresh": len(fresh),
        "statuses": dict(Counter(e.profile.status for e in results)),
        "mean_profile_s": round(mean_duration, 4),
        "throughput_per_s": round(throughput, 3),
        "ideal_per_s": round(ideal, 3),
        "throughput_vs_ideal": round(throughput / ideal, 3),
        "queue_at_least_c_share": round(at_c / covered, 3) if covered else 0.0,
        "saturated_s": round(at_c, 2),
        "saturated_throughput_per_s": round(saturated, 3) if saturated is not None else None,
        "saturated_vs_ideal": round(saturated / ideal, 3) if saturated is not None else None,
        "coordinator_decisions_per_s": round(len(coordinator) / window, 2),
        "log_publish_per_s": round(len(in_window) / window, 2),
        "driver_consume_per_s": round(len(received) / consume_window, 2),
        "driver_lag_ms_p50": round(1e3 * median(lags), 1),
        "driver_lag_ms_p99": round(1e3 * percentile(lags, 99), 1),
        "e2e_ms_p50": round(1e3 * median(e2e), 1),
        "e2e_ms_p99": round(1e3 * percentile(e2e, 99), 1),
        "overhead_ms_p50": round(1e3 * median(overhead), 1),
        "overhead_ms_p99": round(1e3 * percentile(overhead, 99), 1),
        "profiler_host_rss_mb": {k: round(v / 2**20, 1) for k, v in profiler_rss.items()},
        "actor_rss_mb": {role_of(k): round(v / 2**20, 1) for k, v in sorted(sampler.peak.items())},
    }
    point["bottleneck"] = bottleneck(point)
    return point


def bottleneck(p: dict) -> str:
    """The first limit these figures show."""
    if p["throughput_vs_ideal"] >= 0.9:
        return "none: the profilers are saturated (throughput within 10% of ideal)"
    # the saturated rate is biased low for bursty waves (a wave's completions end its
    # saturation), so it names the machinery only when the profilers had work most of the time
    sat = p.get("saturated_vs_ideal")
    if sat is not None and sat < 0.9 and p["queue_at_least_c_share"] >= 0.8:
        return (
            "profiler host / event log: even while C or more requests waited, profiles completed below the "
            "ideal rate (fetch, thread hand-off, publish and ack per profile)"
        )
    return (
        f"supply of work: C or more requests waited only {100 * p['queue_at_least_c_share']:.0f}% of the window; "
        "the rest of the time the profilers idled while the coordinator and the LLM roles produced the next "
        "requests (between iterations, and at the run's start and end)"
    )


def reanalyse(path: Path) -> None:
    """Recompute the derived labels (bottleneck) of a saved result from its own figures."""
    data = json.loads(path.read_text())
    for p in data["points"]:
        p["bottleneck"] = bottleneck(p)
    path.write_text(json.dumps(data, indent=2) + "\n")
    for p in data["points"]:
        print(p["profilers"], p["bottleneck"])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--points", default="1,4,16,64,256")
    ap.add_argument("--profile-s", type=float, default=5.0, help="simulated duration of one profile")
    ap.add_argument("--pass-rate", type=float, default=0.9)
    ap.add_argument("--iterations", type=int, default=3)
    ap.add_argument("--beam", type=int, default=2)
    ap.add_argument("--plans", type=int, default=4)
    ap.add_argument(
        "--problems-per-profiler",
        type=float,
        default=1.0,
        help="problems per simulated profiler (each has beam x plans candidates per iteration)",
    )
    ap.add_argument("--llm-concurrency", type=int, default=64)
    ap.add_argument("--memory", action="store_true", help="with the memory on (curator, retrieval, embedder)")
    ap.add_argument("--timeout", type=float, default=1200.0)
    ap.add_argument("--name", default="scale_bench")
    ap.add_argument("--reanalyse", type=Path, help="recompute the labels of a saved result and exit")
    args = ap.parse_args()
    if args.reanalyse:
        reanalyse(args.reanalyse)
        return 0
    points = [int(x) for x in args.points.split(",") if x.strip()]

    from actors.runtime.deployment import init_ray
    from events.server import NatsServer

    out: list[dict] = []
    with tempfile.TemporaryDirectory(prefix="scale-bench-") as d:
        tmp = Path(d)
        server = NatsServer(tmp / "nats")
        server.start()
        try:
            init_ray(num_cpus=max(4, os.cpu_count() or 2))
            for c in points:
                point = run_point(c, args, server.url, tmp)
                out.append(point)
                save(
                    f"{args.name}.partial",
                    {"settings": {k: v for k, v in vars(args).items() if k != "name"}, "points": out},
                )
                print(
                    {
                        k: point[k]
                        for k in (
                            "profilers",
                            "throughput_per_s",
                            "ideal_per_s",
                            "throughput_vs_ideal",
                            "saturated_vs_ideal",
                            "coordinator_decisions_per_s",
                            "log_publish_per_s",
                            "e2e_ms_p50",
                            "e2e_ms_p99",
                            "profiler_host_rss_mb",
                            "bottleneck",
                        )
                    },
                    flush=True,
                )
        finally:
            import ray

            ray.shutdown()
            server.kill()
    base = next((p for p in out if p["profilers"] == 1), None)
    per_profiler_kb = {}
    if base and base["profiler_host_rss_mb"]:
        b = max(base["profiler_host_rss_mb"].values())
        for p in out:
            if p["profilers"] > 1 and p["profiler_host_rss_mb"]:
                per_profiler_kb[p["profilers"]] = round(
                    1024 * (max(p["profiler_host_rss_mb"].values()) - b) / (p["profilers"] - 1), 1
                )
    save(
        args.name,
        {
            "settings": {k: v for k, v in vars(args).items() if k != "name"},
            "points": out,
            "extra_rss_kb_per_simulated_profiler": per_profiler_kb,
            "ray_actor_per_profiler_rss_mb": (
                max(base["profiler_host_rss_mb"].values()) if base and base["profiler_host_rss_mb"] else None
            ),
        },
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
