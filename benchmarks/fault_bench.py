"""Faults during a run: a run on a 3-node JetStream cluster (stream at replicas 3) loses a
NATS node (kill -9) and gets it back, loses a profiler host process (kill -9; Ray restarts
it) and has the other profiler host stalled (SIGSTOP, then SIGCONT). It must complete with
0 lost and 0 doubled results, checked from the exported log, and `replay --verify` must
accept the log.

Real nats-server nodes, real Ray, the real coordinator and LLM roles (offline
`builtin/tuner`); only the device is simulated (`sim`: a profile sleeps `--profile-s`
without CPU), so the faults land while many profiles are in flight. Two profiler hosts of
`--per-host` simulated profilers each.

Per fault it reports the recovery time:
- node: from the kill to the first event written after it (the log keeps taking events on
  the two nodes left), and from the node's return to its replica of the stream being
  current again (it catches up on what it missed);
- host kill: from the kill to the result of every profile that was in flight at the kill
  (JetStream redelivers them after `workers.ack_wait_s` to a live host) and to the first
  result of the restarted host;
- stall: from SIGSTOP to the result of every profile in flight at the stall (redelivered
  elsewhere; the stalled host's late results are de-duplicated by their derived ids).

Usage: python benchmarks/fault_bench.py [--problems 16] [--profile-s 2] [--node-down-s 10] [--stall-s 15]
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from _common import ask_log, save
from scale_bench import actor_processes

import accelopt  # noqa: F401  (offline defaults)
from accelopt import catalog as ev


def stream_info(url: str) -> Any:
    """The event stream's info (leader, replicas and their lag), or None if it cannot be had."""
    return ask_log(url, lambda elog: elog.stream_info(), 10)


def replica_current(url: str, name: str) -> bool:
    info = stream_info(url)
    if info is None or info.cluster is None:
        return False
    if info.cluster.leader == name:
        return True
    return any(
        p.name == name and p.current and not p.offline and not p.lag for p in info.cluster.replicas or []
    )


class Faults:
    """Injects the faults from the driver's event callback (each once, at a share of the
    expected profiles), on threads of their own so the callback never blocks."""

    def __init__(self, nodes: list[Any], url: str, expected: int, args: argparse.Namespace) -> None:
        self.nodes, self.url, self.expected, self.args = nodes, url, expected, args
        self.profiled = 0
        self.times: dict[str, float] = {}
        self.errors: list[str] = []
        self._threads: list[threading.Thread] = []

    def _spawn(self, fn: Any) -> None:
        t = threading.Thread(target=self._guard, args=(fn,), daemon=True)
        self._threads.append(t)
        t.start()

    def _guard(self, fn: Any) -> None:
        try:
            fn()
        except Exception as e:  # reported in the result, never silently
            self.errors.append(f"{fn.__name__}: {type(e).__name__}: {e}")

    def on_event(self, event: ev.Event, _view: Any) -> None:
        if not isinstance(event, ev.KernelProfiled):
            return
        self.profiled += 1
        share = self.profiled / self.expected
        if share >= 0.15 and "node_killed" not in self.times:
            self.times["node_killed"] = time.time()
            self._spawn(self.node_down_and_back)
        if share >= 0.40 and "host_killed" not in self.times:
            self.times["host_killed"] = time.time()
            self._spawn(self.kill_host)
        if share >= 0.65 and "host_stalled" not in self.times:
            self.times["host_stalled"] = time.time()
            self._spawn(self.stall_host)

    def node_down_and_back(self) -> None:
        victim = self.nodes[2]
        victim.kill()
        time.sleep(self.args.node_down_s)
        victim.launch()
        victim.wait_ready(timeout=60)
        self.times["node_back"] = time.time()
        deadline = time.time() + 120
        while time.time() < deadline:
            if replica_current(self.url, victim.name or ""):
                self.times["node_current"] = time.time()
                return
            time.sleep(0.25)

    def _host_pid(self, worker: str) -> int:
        for name, pid in actor_processes({}).items():
            if name.startswith(f"accelopt-profiler-{worker}-"):
                return pid
        raise RuntimeError(f"no profiler host for {worker}")

    def kill_host(self) -> None:
        os.kill(self._host_pid("sim-0"), signal.SIGKILL)

    def stall_host(self) -> None:
        pid = self._host_pid("sim-1")
        os.kill(pid, signal.SIGSTOP)
        time.sleep(self.args.stall_s)
        os.kill(pid, signal.SIGCONT)
        self.times["host_resumed"] = time.time()

    def join(self) -> None:
        for t in self._threads:
            t.join(timeout=180)


def in_flight_at(events: list[ev.Event], t: float) -> list[str]:
    """Profile requests made before `t` whose result came after it."""
    done_before = {e.request_id for e in events if isinstance(e, ev.KernelProfiled) and e.ts < t}
    return [
        e.event_id
        for e in events
        if isinstance(e, ev.ProfileRequested) and e.ts < t and e.event_id not in done_before
    ]


def answered_by(events: list[ev.Event], requests: list[str]) -> float | None:
    """When the last of `requests` got its (first) result; None if one never did."""
    first: dict[str, float] = {}
    for e in events:
        if isinstance(e, ev.KernelProfiled) and e.request_id not in first:
            first[e.request_id] = e.ts
    if any(r not in first for r in requests):
        return None
    return max((first[r] for r in requests), default=None)


def first_after(events: list[ev.Event], t: float, worker: str | None = None) -> float | None:
    return next(
        (
            e.ts
            for e in sorted(events, key=lambda e: e.ts)
            if e.ts > t and (worker is None or (isinstance(e, ev.KernelProfiled) and e.worker == worker))
        ),
        None,
    )


def since(t0: float | None, t1: float | None) -> float | None:
    return round(t1 - t0, 2) if t0 is not None and t1 is not None else None


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--problems", type=int, default=16)
    ap.add_argument("--profile-s", type=float, default=2.0)
    ap.add_argument("--per-host", type=int, default=4, help="simulated profilers per profiler host (2 hosts)")
    ap.add_argument("--iterations", type=int, default=3)
    ap.add_argument("--node-down-s", type=float, default=10.0)
    ap.add_argument("--stall-s", type=float, default=15.0)
    ap.add_argument("--ack-wait-s", type=float, default=6.0)
    ap.add_argument("--timeout", type=float, default=1800.0)
    args = ap.parse_args()

    import suites
    from accelopt.config import build_config
    from actors.runtime.deployment import init_ray
    from actors.runtime.session import SessionOptions, run_session
    from events.logfile import read_events
    from events.server import start_cluster
    from hardware_agents.sim.suite import write_suite
    from replay.verify import verify

    with tempfile.TemporaryDirectory(prefix="fault-bench-") as d:
        tmp = Path(d)
        nodes = start_cluster(tmp)
        url = ",".join(n.url for n in nodes)
        try:
            init_ray(num_cpus=max(4, os.cpu_count() or 2))
            suite = write_suite(tmp / "suite", args.problems)
            cfg = build_config(
                overrides=[
                    f"root={tmp / 'runs'}",
                    f"suite={suite}",
                    "device=sim",
                    "seed=1",
                    "log.replicas=3",
                    "search.beam_width=2",
                    "search.plans_per_candidate=4",
                    "search.samples_per_plan=1",
                    f"search.iterations={args.iterations}",
                    "search.remeasure_rounds=0",
                    "search.fix_rounds=0",
                    "memory.enabled=false",
                    "devices.sim.workers=2",
                    f"devices.sim.concurrency={args.per_host}",
                    "devices.sim.options.allow=true",
                    f"devices.sim.options.profile_s={args.profile_s}",
                    "devices.sim.options.pass_rate=0.9",
                    f"workers.ack_wait_s={args.ack_wait_s}",
                    "workers.heartbeat_s=1",
                    f"limits.profiles_inflight_per_device={4 * args.per_host}",
                ]
            )
            # profiles per problem: the baseline, then beam x plans per iteration (the first has a beam of one)
            expected = args.problems * (1 + 4 + 8 * (args.iterations - 1))
            faults = Faults(nodes, url, expected, args)
            t0 = time.time()
            outcome = run_session(
                cfg,
                suites.load_suite(str(suite)),
                SessionOptions(
                    nats_url=url, on_event=faults.on_event, timeout_s=args.timeout, log_level="ERROR"
                ),
            )
            wall = time.time() - t0
            faults.join()
            events = read_events(outcome.run_dir / "log.aolog")
        finally:
            import ray

            ray.shutdown()
            for n in nodes:
                n.kill()

    requests = [e for e in events if isinstance(e, ev.ProfileRequested)]
    results = Counter(e.request_id for e in events if isinstance(e, ev.KernelProfiled))
    ids = Counter(e.event_id for e in events)
    t = faults.times
    host_inflight = in_flight_at(events, t["host_killed"]) if "host_killed" in t else []
    stall_inflight = in_flight_at(events, t["host_stalled"]) if "host_stalled" in t else []
    report = {
        "completed": outcome.view.completed is not None and outcome.view.completed.reason == "completed",
        "timed_out": outcome.timed_out,
        "run_wall_s": round(wall, 1),
        "events": len(events),
        "profile_requests": len(requests),
        "lost_results": sum(1 for r in requests if results[r.event_id] == 0),
        "doubled_results": sum(1 for r in requests if results[r.event_id] > 1),
        "duplicate_event_ids": sum(1 for n in ids.values() if n > 1),
        "verify_ok": verify(events).ok,
        "fault_errors": faults.errors,
        "faults_injected": sorted(t),
        "node": {
            "down_s": args.node_down_s,
            "kill_to_next_event_s": since(t.get("node_killed"), first_after(events, t["node_killed"]))
            if "node_killed" in t
            else None,
            "back_to_replica_current_s": since(t.get("node_back"), t.get("node_current")),
        },
        "host_kill": {
            "in_flight": len(host_inflight),
            "kill_to_all_in_flight_answered_s": since(
                t.get("host_killed"), answered_by(events, host_inflight)
            ),
            "kill_to_restarted_host_result_s": since(
                t.get("host_killed"), first_after(events, t["host_killed"], "sim-0")
            )
            if "host_killed" in t
            else None,
        },
        "stall": {
            "stall_s": args.stall_s,
            "in_flight": len(stall_inflight),
            "stop_to_all_in_flight_answered_s": since(
                t.get("host_stalled"), answered_by(events, stall_inflight)
            ),
        },
    }
    print(report)
    save("fault_bench", {"settings": vars(args), **report})
    ok = (
        report["completed"]
        and not report["lost_results"]
        and not report["doubled_results"]
        and report["verify_ok"]
        and not faults.errors
        and len(t) >= 5
    )
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
