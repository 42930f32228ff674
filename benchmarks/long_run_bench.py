"""A long, time-compressed run: many problems and many iterations on the simulated device,
killed with kill -9 at random points and resumed each time, until it completes.

The orchestration is the real CLI (`accelopt run`, then `accelopt resume` after each kill:
embedded nats-server, local Ray, the coordinator, the offline `builtin/tuner` model); only
the device is simulated (`sim`: a profile sleeps `--profile-s` without CPU). The run keeps
going far past what a test would (default 48 problems x 300 iterations of beam 2 x 4
plans, about a million events), so it shows what grows with a run's length.

What it measures:

- RSS over time of every process of the run (the CLI, each Ray actor by class, Ray's own
  daemons, the nats-server), sampled every `--sample-s`, with the event count at each
  sample; per process and segment (the time between two kills), the growth from the
  sample at a quarter of the segment to its last sample, in MB and in MB per 100k events;
- the kills: at 3 random event counts (seeded) every process of the CLI's session is
  SIGKILLed (the CLI and the Ray processes it started; the nats-server is the root's and
  outlives it), then `accelopt resume RUN` continues; the time from each resume to the
  next new event;
- from the exported log when the run is done: every ProfileRequested answered by exactly
  one KernelProfiled and every LLM request by exactly one LLMCallCompleted (0 lost, 0
  doubled), one RunStarted and one KernelProposed per request answered with a kernel;
- `accelopt replay RUN --verify` and `accelopt report RUN` on it: exit code, wall time and
  peak RSS.

Usage: python benchmarks/long_run_bench.py [--problems 48] [--iterations 300] [--kills 3]
       [--profile-s 0.002] [--concurrency 64] [--seed 1] [--duplicate-window-s 120] [--root DIR]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import random
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from _common import ask_log, load_search, save, sim_device
from fault_bench import stream_info

import accelopt  # noqa: F401  (offline defaults)
from accelopt import catalog as ev
from accelopt.procfs import pids_of_session, sigkill

ACCELOPT = [sys.executable, "-m", "cli.main"]
TARGET_EVENTS = 1_000_000


# --- processes ------------------------------------------------------------------------------


def session_pids(sid: int) -> list[int]:
    """Every live process whose session id is `sid` (the CLI started with start_new_session)."""
    return sorted(pids_of_session(sid))


def kill_session(sid: int) -> int:
    """SIGKILL every process of a session, as a crash of the CLI's machine would; returns how
    many. (Ray's workers run in their own process groups, so killpg is not enough.)"""
    return len(sigkill(pids_of_session(sid)))


def rss_mb(pid: int) -> float | None:
    """Resident set of a process, from /proc (None once it is gone)."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        return None
    return None


def cmdline_of(pid: int) -> list[str]:
    try:
        return [a for a in Path(f"/proc/{pid}/cmdline").read_text().split("\0") if a]
    except OSError:
        return []


def role_of(cmdline: list[str], cli_pid: int, pid: int) -> str:
    """A stable name for a process of the run: `cli`, `ray::ClassName`, a Ray daemon's name."""
    if pid == cli_pid:
        return "cli"
    head = cmdline[0] if cmdline else ""
    if head.startswith("ray::"):
        return head.split(".")[0].split(" ")[0]
    for part in cmdline[:3]:
        base = os.path.basename(part)
        for daemon in (
            "raylet",
            "gcs_server",
            "nats-server",
            "log_monitor",
            "dashboard",
            "monitor",
            "runtime_env_agent",
            "default_worker",
        ):
            if daemon in base or daemon in " ".join(cmdline[:4]):
                return f"ray:{daemon}" if daemon != "nats-server" else daemon
    return os.path.basename(head) or "?"


@dataclass
class Sample:
    t: float
    events: int
    segment: int
    rss_mb: dict[str, float]  # per kind of process (summed over processes of a kind)
    by_pid: dict[str, float]  # per process: "kind#pid"


@dataclass
class Sampler:
    """Samples the RSS of the current segment's processes and the nats-server in a thread."""

    url: str
    nats_pid: int | None
    period_s: float
    samples: list[Sample] = field(default_factory=list)
    cli_pid: int = 0
    segment: int = 0
    events: int = 0
    _stop: threading.Event = field(default_factory=threading.Event)

    def start(self) -> None:
        threading.Thread(target=self._loop, daemon=True).start()

    def stop(self) -> None:
        self._stop.set()

    def _loop(self) -> None:
        while not self._stop.wait(self.period_s):
            count = stream_messages(self.url)
            if count is not None:
                self.events = count
            pids = session_pids(self.cli_pid) if self.cli_pid else []
            if self.nats_pid:
                pids.append(self.nats_pid)
            rss: dict[str, float] = {}
            by_pid: dict[str, float] = {}
            for pid in pids:
                mb = rss_mb(pid)
                if mb is not None:
                    kind = role_of(cmdline_of(pid), self.cli_pid, pid)
                    rss[kind] = rss.get(kind, 0.0) + mb
                    by_pid[f"{kind}#{pid}"] = round(mb, 1)
            sample = Sample(
                time.time(), self.events, self.segment, {k: round(v, 1) for k, v in rss.items()}, by_pid
            )
            self.samples.append(sample)
            print(
                f"sample {sample.events} events, segment {sample.segment}: "
                f"{ {k: v for k, v in sample.rss_mb.items() if v > 150 or k in ('cli', 'nats-server')} }",
                flush=True,
            )


def stream_messages(url: str) -> int | None:
    """Events on the root's stream (only this run's), or None if the server cannot say."""
    info = stream_info(url)
    return int(info.state.messages) if info is not None else None


def run_id_on(url: str) -> str | None:
    found = ask_log(url, lambda elog: elog.run_ids(), 5)
    return found[0] if found else None


def server_of(root: Path) -> tuple[str, int] | None:
    import json

    try:
        info = json.loads((root / ".nats" / "server.json").read_text())
        return info["url"], int(info["pid"])
    except (OSError, ValueError, KeyError):
        return None


def timed(cmd: list[str], env: dict[str, str]) -> dict:
    """Run a CLI command to its end: exit code, wall seconds, peak RSS (MB, polled), last lines."""
    t0 = time.time()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
    peak = 0.0
    out: list[str] = []
    reader = threading.Thread(target=lambda: out.extend(proc.stdout or []), daemon=True)
    reader.start()
    while proc.poll() is None:
        peak = max(peak, rss_mb(proc.pid) or 0.0)
        time.sleep(0.2)
    reader.join(5)
    return {
        "rc": proc.returncode,
        "wall_s": round(time.time() - t0, 1),
        "peak_rss_mb": round(peak, 1),
        "tail": [line.rstrip() for line in out[-4:]],
    }


# --- the log --------------------------------------------------------------------------------


def log_checks(events: list[ev.Event]) -> dict:
    """Lost and doubled answers, counted from the exported log."""
    profile_requests = {e.event_id for e in events if isinstance(e, ev.ProfileRequested)}
    llm_requests = {e.event_id for e in events if isinstance(e, tuple(ev.ROLE_OF_REQUEST))}
    profiled = Counter(e.request_id for e in events if isinstance(e, ev.KernelProfiled))
    answered = Counter(e.request_id for e in events if isinstance(e, ev.LLMCallCompleted))
    # one KernelProposed per request that got a kernel (a kernel is its content: the same source
    # proposed by two requests is one kernel, proposed twice)
    proposed = Counter(e.request_id for e in events if isinstance(e, ev.KernelProposed))
    kernels = {e.kernel_id for e in events if isinstance(e, ev.KernelProposed)}
    ids = Counter(e.event_id for e in events)
    return {
        "events": len(events),
        "event_mix": dict(Counter(type(e).__name__ for e in events).most_common()),
        "run_started": sum(isinstance(e, ev.RunStarted) for e in events),
        "run_completed": sum(isinstance(e, ev.RunCompleted) for e in events),
        "profile_requests": len(profile_requests),
        "profiles_lost": sum(1 for r in profile_requests if profiled[r] == 0),
        "profiles_doubled": sum(1 for r in profile_requests if profiled[r] > 1),
        "llm_requests": len(llm_requests),
        "llm_lost": sum(1 for r in llm_requests if answered[r] == 0),
        "llm_doubled": sum(1 for r in llm_requests if answered[r] > 1),
        "kernels": len(kernels),
        "kernels_doubled": sum(1 for n in proposed.values() if n > 1),
        "event_ids_doubled": sum(1 for n in ids.values() if n > 1),
    }


def growth(samples: list[Sample]) -> dict:
    """Per segment and process: RSS at a quarter of the segment (after warm-up) and at its end,
    the last sample while the run still made events (not the export of the log after its last
    event, which reads the whole stream). Ray's actor processes are all `ray::_Host`
    (actors/runtime/hosting.py), so they are told apart by pid."""
    out: dict[str, dict] = {}
    for seg in sorted({s.segment for s in samples}):
        ss = [s for s in samples if s.segment == seg and s.rss_mb.get("cli")]
        if len(ss) < 4:
            continue
        top = max(s.events for s in ss)
        ss = ss[: next(i for i, s in enumerate(ss) if s.events == top) + 1]
        a = ss[len(ss) // 4]
        per: dict[str, dict] = {}
        for proc in sorted(a.by_pid):
            b = next((s for s in reversed(ss) if proc in s.by_pid), a)
            d = b.by_pid[proc] - a.by_pid[proc]
            dev = max(b.events - a.events, 1)
            per[proc] = {
                "from_mb": a.by_pid[proc],
                "to_mb": b.by_pid[proc],
                "growth_mb": round(d, 1),
                "mb_per_100k_events": round(1e5 * d / dev, 2),
            }
        b = ss[-1]
        out[str(seg)] = {
            "from_events": a.events,
            "to_events": b.events,
            "seconds": round(b.t - a.t, 1),
            "processes": per,
        }
    return out


# --- main -----------------------------------------------------------------------------------


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--problems", type=int, default=48)
    ap.add_argument("--iterations", type=int, default=300)
    ap.add_argument("--beam", type=int, default=2)
    ap.add_argument("--plans", type=int, default=4)
    ap.add_argument("--profile-s", type=float, default=0.002, help="simulated duration of one profile")
    ap.add_argument("--concurrency", type=int, default=64, help="simulated profilers in the one host")
    ap.add_argument("--kills", type=int, default=3)
    ap.add_argument(
        "--expect-events",
        type=int,
        default=TARGET_EVENTS,
        help="where the kill points are drawn from (10%%-90%% of this)",
    )
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--sample-s", type=float, default=5.0)
    ap.add_argument("--timeout", type=float, default=7200.0, help="for the whole run, seconds")
    ap.add_argument(
        "--duplicate-window-s",
        type=float,
        default=120.0,
        help="log.duplicate_window_s: JetStream keeps every message id this long (~300 B each), "
        "so a time-compressed run compresses it too (default 120 s; a real run's is an hour)",
    )
    ap.add_argument("--root", help="runs directory (default: a scratch directory, removed)")
    ap.add_argument("--name", default="long_run_bench")
    args = ap.parse_args()

    from events.logfile import read_events
    from hardware_agents.sim.suite import write_suite

    rng = random.Random(args.seed)
    kill_at = sorted(
        rng.randint(args.expect_events // 10, 9 * args.expect_events // 10) for _ in range(args.kills)
    )
    print(f"kill -9 at events {kill_at}", flush=True)
    scratch = tempfile.TemporaryDirectory(prefix="long-run-") if not args.root else None
    base = Path(args.root or scratch.name)  # type: ignore[union-attr]
    root = base / "runs"
    root.mkdir(parents=True, exist_ok=True)
    suite = write_suite(base / "suite", args.problems)
    env = {k: v for k, v in os.environ.items() if k != "ACCELOPT_MEMORY"}
    env["ACCELOPT_LOG_LEVEL"] = "ERROR"
    settings = [
        *load_search(args.beam, args.plans, args.iterations),
        "memory.enabled=false",
        *sim_device(args.concurrency, args.profile_s, 0.9, args.seed),
        f"limits.profiles_inflight_per_device={2 * args.concurrency}",
        f"limits.llm_inflight_per_role={2 * args.concurrency}",
        "llm.default.concurrency=64",
        f"log.duplicate_window_s={args.duplicate_window_s:g}",
    ]
    cmd = [
        *ACCELOPT,
        "run",
        "--suite",
        str(suite),
        "--device",
        "sim",
        "--root",
        str(root),
        "--seed",
        str(args.seed),
        "--timeout",
        str(args.timeout),
        "--no-preflight",
    ]
    for s in settings:
        cmd += ["--set", s]

    t_start = time.time()
    kills: list[dict] = []
    run_id: str | None = None
    sampler: Sampler | None = None
    proc = subprocess.Popen(
        cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env, start_new_session=True
    )
    try:
        for segment in range(args.kills + 1):
            if sampler is None:
                while (server := server_of(root)) is None:
                    if proc.poll() is not None:
                        print(proc.stdout.read() if proc.stdout else "")
                        raise SystemExit(f"the run exited ({proc.returncode}) before its server was up")
                    time.sleep(0.2)
                sampler = Sampler(server[0], server[1], args.sample_s)
                sampler.cli_pid = proc.pid
                sampler.start()
            sampler.cli_pid, sampler.segment = proc.pid, segment
            if segment < args.kills:
                target = kill_at[segment]
                while proc.poll() is None:
                    n = stream_messages(sampler.url) or 0
                    if n >= target:
                        break
                    time.sleep(1.0)
                if proc.poll() is not None:
                    print((proc.stdout.read() if proc.stdout else "")[-3000:])
                    raise SystemExit(
                        f"the run ended ({proc.returncode}) before the kill at {target} events; "
                        "give more --iterations or a smaller --expect-events"
                    )
                run_id = run_id or run_id_on(sampler.url)
                at = stream_messages(sampler.url)
                killed = kill_session(proc.pid)
                proc.wait(10)
                t_kill = time.time()
                time.sleep(1.0)
                print(
                    f"segment {segment}: killed {killed} processes at {at} events "
                    f"({t_kill - t_start:.0f} s); resuming {run_id}",
                    flush=True,
                )
                proc = subprocess.Popen(
                    [
                        *ACCELOPT,
                        "resume",
                        str(run_id),
                        "--root",
                        str(root),
                        "--no-preflight",
                        "--timeout",
                        str(args.timeout),
                    ],
                    stdout=subprocess.PIPE,
                    stderr=subprocess.STDOUT,
                    text=True,
                    env=env,
                    start_new_session=True,
                )
                sampler.cli_pid, sampler.segment = proc.pid, segment + 1
                before = stream_messages(sampler.url) or 0
                while (stream_messages(sampler.url) or 0) <= before and proc.poll() is None:
                    time.sleep(0.2)
                kills.append(
                    {
                        "at_events": at,
                        "processes_killed": killed,
                        "at_s": round(t_kill - t_start, 1),
                        "resume_to_next_event_s": round(time.time() - t_kill, 1),
                    }
                )
        out, _ = proc.communicate(timeout=args.timeout)
        print(out[-1500:], flush=True)
        final_rc = proc.returncode
    finally:
        if sampler is not None:
            sampler.stop()
        if proc.poll() is None:
            kill_session(proc.pid)
    wall = time.time() - t_start
    assert run_id is not None or args.kills == 0
    run_id = run_id or run_id_on(sampler.url)  # type: ignore[union-attr]
    log_path = root / str(run_id) / "log.aolog"
    t0 = time.time()
    events = read_events(log_path)
    read_s = time.time() - t0
    checks = log_checks(events)
    del events
    verify = timed([*ACCELOPT, "replay", str(run_id), "--verify", "--root", str(root)], env)
    report = timed([*ACCELOPT, "report", str(run_id), "--root", str(root)], env)
    report_path = root / str(run_id) / "report.html"
    server = server_of(root)
    if server:
        with contextlib.suppress(ProcessLookupError):
            os.kill(server[1], signal.SIGTERM)
    samples = sampler.samples if sampler else []
    result = {
        "settings": {k: v for k, v in vars(args).items() if k not in ("name", "root")},
        "run_id": run_id,
        "final_rc": final_rc,
        "wall_s": round(wall, 1),
        "events_per_s": round(checks["events"] / wall, 1),
        "log_file_mb": round(log_path.stat().st_size / 2**20, 1),
        "log_read_s": round(read_s, 1),
        "kills": kills,
        "log": checks,
        "replay_verify": verify,
        "report": {
            **report,
            "html_kib": round(report_path.stat().st_size / 1024) if report_path.exists() else None,
        },
        "rss_growth": growth(samples),
        "rss_over_time": [
            {
                "s": round(s.t - t_start, 1),
                "events": s.events,
                "segment": s.segment,
                "rss_mb": s.rss_mb,
                "by_pid": s.by_pid,
            }
            for s in samples
        ],
        "targets": {
            "events": f">= {TARGET_EVENTS}",
            "lost_and_doubled": "0",
            "replay_verify": "exit 0",
            "report": "exit 0",
        },
    }
    ok = (
        checks["events"] >= TARGET_EVENTS
        and checks["run_completed"] == 1
        and checks["run_started"] == 1
        and not any(
            checks[k]
            for k in (
                "profiles_lost",
                "profiles_doubled",
                "llm_lost",
                "llm_doubled",
                "kernels_doubled",
                "event_ids_doubled",
            )
        )
        and verify["rc"] == 0
        and report["rc"] == 0
    )
    result["meets_targets"] = ok
    save(args.name, result)
    print({k: result[k] for k in ("wall_s", "events_per_s", "log_file_mb", "kills", "meets_targets")})
    print({k: v for k, v in checks.items() if k != "event_mix"})
    print("verify", verify, "report", report)
    for seg, g in result["rss_growth"].items():
        print(
            "segment",
            seg,
            g["from_events"],
            "->",
            g["to_events"],
            {r: (p["from_mb"], p["to_mb"]) for r, p in g["processes"].items() if abs(p["growth_mb"]) >= 5},
        )
    if scratch is not None:
        scratch.cleanup()
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
