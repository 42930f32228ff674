"""The fixed start-up of a run, per part.

Each part is timed in a fresh Python process (so one part's imports do not warm the next),
parts interleaved, `--reps` rounds (median kept):

- `cli`: `import cli.main` (what every command pays);
- `nats`: start the embedded nats-server with JetStream until it answers;
- `ray_init`: a local `ray.init` (and the time to place and start one trivial actor);
- `import:<module>`: the imports each actor makes before it can work (LLM roles: litellm
  through actors.roles.llm_roles; profiler: actors.roles.profiler plus the device registry; curator:
  lancedb; coordinator), and torch / triton / lancedb / sentence_transformers alone;
- `memory_model`: loading the default embedding model and encoding one text;
- `run_to_first_profile`: a whole `run_session` on a one-problem suite of the simulated
  device, from the call to the first ProfileRequested on the log (memory on and off; and
  with a process per LLM role, `workers.llm_roles_together: false`): the start-up a user of
  `accelopt run` waits through.
- `run_to_first_result (warm pool)`: the same run attached to a warm pool (`accelopt up`,
  started once before the parts and not timed), from the start of a fresh interpreter
  (every import included) to the first KernelProfiled on the log: the start-up a user of
  `accelopt run` waits through while a pool is up.

The machine's load average is saved with the figures: on a shared machine every part is
slower than on an idle one.

Usage: python benchmarks/startup_bench.py [--reps 1] [--skip-run]
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

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import median, save

ROOT = Path(__file__).resolve().parent.parent

# code run in a fresh interpreter; each prints the seconds of the part it times
PARTS: dict[str, str] = {
    "cli": "import cli.main",
    "import:actors.roles.llm_roles (LLM roles: litellm)": "import accelopt; import actors.roles.llm_roles",
    "import:actors.roles.profiler + device registry": (
        "import accelopt; import actors.roles.profiler; "
        "from hardware_agents import get_agent; get_agent('cpu')"
    ),
    "import:actors.roles.curator (lancedb)": "import accelopt; import actors.roles.curator",
    "import:actors.roles.coordinator": "import accelopt; import actors.roles.coordinator",
    "import:torch": "import torch",
    "import:triton": "import triton",
    "import:lancedb": "import lancedb",
    "import:sentence_transformers": "import sentence_transformers",
    "memory_model": (
        "import accelopt; from memory_index.embedder import Embedder; Embedder().encode(['warm up'])"
    ),
    "nats": (
        "import tempfile, pathlib; from events.server import NatsServer; "
        "d = tempfile.mkdtemp(); s = NatsServer(pathlib.Path(d) / 'n'); s.start(); s.kill()"
    ),
    "ray_init": (
        "import ray; ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, "
        "configure_logging=False, object_store_memory=100 * 2**20)"
    ),
    "ray_first_actor": (
        "import ray; ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, "
        "configure_logging=False, object_store_memory=100 * 2**20)\n"
        "@ray.remote\nclass A:\n    def ping(self): return 1\n"
        "import time; t = time.perf_counter(); ray.get(A.remote().ping.remote()); "
        "T0 = t"
    ),
}

WRAPPER = """
import time, sys, os
sys.path.insert(0, {root!r})
T0 = time.perf_counter()
{code}
print("PART_SECONDS", time.perf_counter() - T0)
"""


def time_part(code: str) -> float:
    env = {**os.environ, "TRITON_INTERPRET": "1", "RAY_DEDUP_LOGS": "0"}
    out = subprocess.run(
        [sys.executable, "-c", WRAPPER.format(root=str(ROOT), code=code)],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        timeout=900,
    )
    for line in out.stdout.splitlines():
        if line.startswith("PART_SECONDS"):
            return float(line.split()[1])
    raise RuntimeError(f"part failed: {code}\n{out.stderr[-2000:]}")


RUN_CODE = """
import accelopt, tempfile, time, pathlib, suites
from accelopt.config import build_config
from actors.runtime.session import SessionOptions, run_session
from hardware_agents.sim.suite import write_suite
tmp = pathlib.Path(tempfile.mkdtemp())
suite = write_suite(tmp, 1)
cfg = build_config(overrides=[f"root={tmp / 'runs'}", f"memory.uri={tmp / 'mem'}", f"suite={suite}", "device=sim",
    "search.iterations=0", "search.remeasure_rounds=0", "devices.sim.options.allow=true",
    "devices.sim.options.profile_s=0.01", "memory.enabled=MEMORY", "workers.llm_roles_together=TOGETHER"])
first = []
def on_event(e, _v):
    if e.type == "ProfileRequested" and not first:
        first.append(time.perf_counter())
t = time.perf_counter()
run_session(cfg, suites.load_suite(str(suite)), SessionOptions(on_event=on_event, timeout_s=900, log_level="ERROR"))
T0 = t
print("PART_SECONDS", first[0] - t)
import sys; sys.exit(0)
"""


POOL_SETTINGS = [
    "--devices",
    "sim",
    "--set",
    "devices.sim.options.allow=true",
    "--set",
    "devices.sim.options.profile_s=0.01",
]

POOL_RUN_CODE = """
import accelopt, time, suites
from accelopt.config import build_config
from actors.runtime.pool import attach_check
from actors.runtime.session import SessionOptions, run_session
cfg = build_config(overrides=["root=ROOT", "memory.uri=MEMORY", "suite=SUITE", "device=sim",
    "search.iterations=0", "search.remeasure_rounds=0", "devices.sim.options.allow=true",
    "devices.sim.options.profile_s=0.01"])
pool, why = attach_check(cfg, ["sim"])
assert pool is not None, why or "no pool"
first = []
def on_event(e, _v):
    if e.type == "KernelProfiled" and not first:
        first.append(time.perf_counter())
run_session(cfg, suites.load_suite("SUITE"), SessionOptions(on_event=on_event, timeout_s=300, log_level="ERROR",
            nats_url=pool.nats_url, start_workers=False, coordinator="local"))
print("PART_SECONDS", first[0] - T0)
import sys; sys.exit(0)
"""


def start_pool(tmp: Path) -> tuple[subprocess.Popen, str]:
    """A warm pool for the sim device under `tmp` (not timed); returns it and the part's code."""
    from actors.runtime.pool import read_pool
    from hardware_agents.sim.suite import write_suite

    root, memory = tmp / "pool-runs", tmp / "pool-memory"
    suite = write_suite(tmp, 1, name="pool-sim")
    env = {**os.environ, "ACCELOPT_LOG_LEVEL": "ERROR"}
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "cli.main",
            "up",
            "--root",
            str(root),
            "--memory",
            str(memory),
            *POOL_SETTINGS,
        ],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 600
    while read_pool(root) is None:
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            raise RuntimeError("the warm pool did not come up")
        time.sleep(0.2)
    code = (
        POOL_RUN_CODE.replace("ROOT", str(root)).replace("MEMORY", str(memory)).replace("SUITE", str(suite))
    )
    return proc, code


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--reps", type=int, default=1)
    ap.add_argument("--skip-run", action="store_true", help="leave out the whole-run start-up")
    ap.add_argument("--only", help="comma-separated part names (prefix match)")
    ap.add_argument("--name", default="startup_bench")
    args = ap.parse_args()
    parts = dict(PARTS)
    if not args.skip_run:
        for mem in ("false", "true"):
            parts[f"run_to_first_profile (memory {'on' if mem == 'true' else 'off'})"] = RUN_CODE.replace(
                "MEMORY", mem
            ).replace("TOGETHER", "true")
        # the same with a process per LLM role (each importing litellm), as before they shared one
        parts["run_to_first_profile (memory on, a process per LLM role)"] = RUN_CODE.replace(
            "MEMORY", "true"
        ).replace("TOGETHER", "false")
    if args.only:
        keys = [k.strip() for k in args.only.split(",")]
        parts = {n: c for n, c in parts.items() if any(n.startswith(k) for k in keys)}
    figures: dict[str, dict] = {}
    load_before = os.getloadavg()
    failed: set[str] = set()
    pool_part = "run_to_first_result (warm pool)"
    with_pool = not args.skip_run and (
        not args.only or any(pool_part.startswith(k.strip()) for k in args.only.split(","))
    )
    runs: dict[str, list[float]] = {name: [] for name in [*parts, *([pool_part] if with_pool else [])]}

    def timed(name: str, code: str) -> None:
        if name in failed:
            return
        try:
            runs[name].append(time_part(code))
            print(f"{name}: {runs[name][-1]:.2f} s", flush=True)
        except Exception as e:
            print(f"{name}: failed: {e}", flush=True)
            failed.add(name)

    with tempfile.TemporaryDirectory() as tmp:
        for _ in range(args.reps):  # parts interleaved, so each rep of every part sees similar load
            for name, code in parts.items():
                timed(name, code)
        if with_pool:  # after the others, so no other part runs beside an idle pool
            pool, code = start_pool(Path(tmp))
            try:
                for _ in range(args.reps):
                    timed(pool_part, code)
            finally:
                pool.terminate()
                pool.wait(timeout=120)
    for name, secs in runs.items():
        if secs:
            figures[name] = {"median_s": round(median(secs), 3), "runs_s": [round(s, 3) for s in secs]}
    save(
        args.name,
        {
            "parts": figures,
            "load_average_before": load_before,
            "load_average_after": os.getloadavg(),
            "cpus": os.cpu_count(),
        },
    )
    print(json.dumps({k: v["median_s"] for k, v in figures.items()}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
