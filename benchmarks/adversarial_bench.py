"""Adversarial benchmark: is every hack caught, is no honest kernel rejected, and what does
the trusted boundary cost?

    .venv/bin/python benchmarks/adversarial_bench.py [--run RUN_DIR] [--skip-triton] [--rounds 3]

1. hack x device -> status: every file of the adversarial corpus (tests/hardware_agents/adversarial/<device>/)
   through the real agent of its device; caught = it got the status its file names.
2. false rejections: every CPU suite's baselines (`cpu`, `cpu_v2`: must pass), the Triton
   suite's baselines in the interpreter (must be `unmeasured`: correct, not timed), and the
   best kernels of a finished run (`--run runs/<id>`, e.g. a `make demo` run; must pass
   again). For the CPU baselines it also records what a profile checked (timed calls, full
   checks, the lazy fraction caught with probability >= 99 %) and its wall time.
3. the cost of the boundary on the CPU: the handshake of one batch (SIGCONT -> the child
   stopped again) measured with a kernel that does nothing, per call as a share of each
   suite baseline's latency at the batch size its profile used; and each baseline's
   median latency through the boundary vs the same .so timed in-process around each ctypes
   call (the old harness's way), interleaved, median of `--rounds`.

Saves benchmarks/results/adversarial_bench.json.
"""

from __future__ import annotations

import argparse
import ctypes
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests" / "shared"))
from testdirs import ADVERSARIAL, CPU, NEURON, TRITON  # noqa: E402

sys.path[:0] = [str(ADVERSARIAL), str(CPU)]

import accelopt  # noqa: F401,E402  (environment defaults)
import suites  # noqa: E402
from benchmarks._common import median, save  # noqa: E402
from hardware_agents.cpu import CpuAgent  # noqa: E402
from hardware_agents.cpu.runner import KernelRunner  # noqa: E402
from hardware_agents.families import get_agent  # noqa: E402
from hardware_agents.pipeline import buffers  # noqa: E402
from hardware_agents.sandbox import Sandbox  # noqa: E402

CPU_PROBLEMS = suites.load_suite("cpu")
CPU_SUITES = ("cpu", "cpu_v2")


def corpus_table(agent: CpuAgent, skip_triton: bool) -> list[dict[str, Any]]:
    from corpus import load
    from cpu_helpers import c_solution, scale_shift_problem

    scale_shift = scale_shift_problem()
    rows = []
    for hack in load("cpu"):
        problem = scale_shift if hack.problem == "scale_shift" else suites.get_problem(hack.problem)
        prof = agent.profile(problem, c_solution(problem, hack.source, name=hack.name), timeout_s=30)
        ok = prof.status == hack.expect and (
            hack.min_ms is None or (prof.latency is not None and prof.latency.min_ms >= hack.min_ms)
        )
        rows.append(
            {"device": "cpu", "hack": hack.name, "expected": hack.expect, "got": prof.status, "caught": ok}
        )
        print(
            f"  cpu  {hack.name:28s} expected {hack.expect:15s} got {prof.status:15s} {'ok' if ok else 'MISSED'}"
        )
    if not skip_triton:
        rows += triton_rows()
    rows += neuron_emulated_rows()
    return rows


def neuron_emulated_rows() -> list[dict[str, Any]]:
    """The emulated NKI corpus through the emulate mode's agent (trace, validate, execute,
    price), as tests/hardware_agents/neuron does: the status, and for an estimate the margin
    to its honest twin (`reference`) or the floor it may not go below (`at_least`)."""
    sys.path.insert(0, str(NEURON))
    from corpus import load, reference_source
    from test_emulator_agent import _plain, _with

    from hardware_agents.neuron import Trn1Agent

    agent = Trn1Agent(timeout_s=300)
    estimates: dict[tuple[str, str], float | None] = {}

    def estimate(problem: Any, source: str, name: str) -> float | None:
        key = (problem.name, source)
        if key not in estimates:
            prof = agent.profile(problem, _with(problem, source, name))
            estimates[key] = prof.estimate.latency_ms if prof.estimate is not None else None
        return estimates[key]

    rows = []
    try:
        for hack in load("neuron_emulated"):
            p = _plain(hack.problem)
            prof = agent.profile(p, _with(p, hack.source, hack.name))
            got_ms = prof.estimate.latency_ms if prof.estimate is not None else None
            ok = prof.status == hack.expect and hack.needle in prof.log + " ".join(
                c.note for c in prof.correctness
            )
            twin_ms = floor_ms = None
            if ok and hack.reference and got_ms is not None:
                twin_ms = estimate(p, reference_source(hack), hack.reference)
                ok = twin_ms is not None and abs(got_ms - twin_ms) <= hack.margin * twin_ms + 1e-12
            if ok and hack.at_least and got_ms is not None:
                floor_ms = estimate(p, reference_source(hack, hack.at_least), hack.at_least)
                ok = floor_ms is not None and got_ms >= floor_ms * (1 - 1e-9)
            rows.append(
                {
                    "device": "trn1 (emulated)",
                    "hack": hack.name,
                    "expected": hack.expect,
                    "got": prof.status,
                    "estimate_ms": got_ms,
                    "twin_ms": twin_ms,
                    "at_least_ms": floor_ms,
                    "caught": ok,
                }
            )
            print(
                f"  nki    {hack.name:34s} expected {hack.expect:13s} got {prof.status:13s} "
                f"{'ok' if ok else 'MISSED'}" + (f" est {got_ms:.6f} ms" if got_ms else "")
            )
    finally:
        agent.close()
    return rows


def triton_rows() -> list[dict[str, Any]]:
    """The Triton corpus in the interpreter with the timed path on (the host clock plays the
    part of CUDA events, the parent's wall clock bounds it), as tests/hardware_agents/triton does."""
    sys.path.insert(0, str(TRITON))
    from corpus import load
    from triton_helpers import solution

    from hardware_agents.triton import H100Agent

    agent = H100Agent(
        mode="interpreter", interpreter_timing=True, warmup=1, reps=3, trials=2, timeout_s=120.0
    )
    rows = []
    try:
        for hack in load("triton"):
            p = suites.get_problem(hack.problem)
            prof = agent.profile(p, solution(p, hack.source, name=hack.name))
            expect, needle = hack.expected(on_gpu=False)
            ok = prof.status == expect and needle in prof.log + " ".join(c.note for c in prof.correctness)
            rows.append(
                {"device": "triton", "hack": hack.name, "expected": expect, "got": prof.status, "caught": ok}
            )
            print(
                f"  triton {hack.name:26s} expected {expect:15s} got {prof.status:15s} {'ok' if ok else 'MISSED'}"
            )
    finally:
        agent.close()
    return rows


def false_rejections(agent: CpuAgent, run_dir: str | None, skip_triton: bool) -> dict[str, Any]:
    out: dict[str, Any] = {"cpu_baselines": {}, "triton_baselines": {}, "run_best": {}}
    checks: dict[str, Any] = {}
    for suite in CPU_SUITES:
        for p in suites.load_suite(suite):
            prof = agent.profile(p, p.baseline)
            name = f"{suite}/{p.name}"
            out["cpu_baselines"][name] = prof.status
            c = prof.counters
            checks[name] = {
                k: c.get(k)
                for k in (
                    "timed_calls",
                    "timed_full_checks",
                    "lazy_fraction_caught_99",
                    "calls_per_batch",
                    "first_call_ms",
                    "handshake_us",
                    "max_batch_cpu_over_wall",
                )
            } | {"wall_s": prof.wall_s}
            print(
                f"  {name:30s} {prof.status:10s} checked {c.get('timed_full_checks')} of {c.get('timed_calls')} "
                f"timed calls, wall {prof.wall_s:.2f} s"
            )
    if not skip_triton:
        triton = get_agent("h100", mode="interpreter")
        for p in suites.load_suite("triton"):
            out["triton_baselines"][p.name] = triton.profile(p, p.baseline).status
    if run_dir:
        import msgspec

        from accelopt.problem import Solution

        for sol_path in sorted(Path(run_dir).glob("best/*/solution.json")):
            sol = msgspec.json.decode(sol_path.read_bytes(), type=Solution)
            problem = suites.get_problem(f"cpu/{sol.definition}")
            out["run_best"][sol.definition] = agent.profile(problem, sol).status
    bad = [
        f"{k}/{n}"
        for k, d in out.items()
        for n, s in d.items()
        if s not in ("passed", "unmeasured") or (k != "triton_baselines" and s != "passed")
    ]
    out["rejected"] = bad
    out["cpu_checks"] = checks
    return out


def handshake_s(agent: CpuAgent, rounds: int = 200) -> float:
    """Median seconds of one batch of a kernel that does nothing (SIGCONT -> stopped)."""
    from cpu_helpers import c_solution, scale_shift_problem

    p = scale_shift_problem(8, 8)
    build = agent.compiler.build(
        c_solution(p, "void kernel(const float* x, float* out) { (void)x; (void)out; }\n"), p.axis_values()
    )
    assert build.so_path
    with Sandbox(agent.sandbox_policy(agent.data.get(p, (0,)), 1)) as box:
        import shutil

        shutil.copyfile(build.so_path, box.workdir / "kernel.so")
        box.give("kernel.so")
        runner = KernelRunner(
            box, p, library=str(box.workdir / "kernel.so"), symbol="kernel", sets=1, scalars={}, timeout_s=120
        )
        try:
            runner.ready()
            times = [runner.run([0]) for _ in range(rounds)]
        finally:
            runner.close()
    return statistics.median(times)


def in_process_ms(agent: CpuAgent, problem: Any, reps: int = 30) -> float:
    """The old way: the .so loaded here, perf_counter around each call on a rotating set."""
    build = agent.compiler.build(problem.baseline, problem.axis_values())
    assert build.so_path
    lib = ctypes.CDLL(build.so_path)
    fn = lib.kernel
    fn.restype = None
    data = agent.data.get(problem, (0, 21, 42))
    sets = []
    for c in data.cases[:3]:
        ins = [np.ascontiguousarray(c.inputs[n]) for n in problem.definition.inputs]
        outs = [buffers.aligned_empty(r.shape, np.float32) for r in c.ref64.values()]
        sets.append(([a.ctypes.data for a in (*ins, *outs)], ins, outs))  # the arrays stay alive
    times = []
    for i in range(reps):
        ptrs = sets[i % len(sets)][0]
        t0 = time.perf_counter()
        fn(*[ctypes.c_void_p(x) for x in ptrs])
        times.append(time.perf_counter() - t0)
    return statistics.median(times) * 1e3


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--run", help="a finished run's folder: its best kernels must pass again")
    ap.add_argument("--skip-triton", action="store_true")
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    agent = CpuAgent()
    figures: dict[str, Any] = {
        "notes": "measured on a shared 2-core VM; latency ratios are noisy, the handshake "
        "share is the boundary's own cost per call",
        "load_average_at_start": os.getloadavg(),
    }
    print("hack x device -> status")
    table = corpus_table(agent, args.skip_triton)
    figures.update(table=table, caught=sum(r["caught"] for r in table), hacks=len(table))
    save("adversarial_bench", figures)  # saved after every part: a long run cut short keeps what it measured
    print("false rejections")
    fr = false_rejections(agent, args.run, args.skip_triton)
    print(f"  rejected: {fr['rejected'] or 'none'}")
    figures["false_rejections"] = fr
    save("adversarial_bench", figures)
    print("boundary cost")
    h = handshake_s(agent)
    print(f"  handshake (one batch of a no-op kernel): {h * 1e6:.0f} us")
    overhead: dict[str, Any] = {}
    figures.update(handshake_us=h * 1e6, overhead=overhead)
    for p in CPU_PROBLEMS:
        new, old, calls = [], [], []
        for _ in range(args.rounds):
            prof = agent.profile(p, p.baseline)
            if prof.latency is None:
                break
            new.append(prof.latency.median_ms)
            calls.append(prof.counters.get("calls_per_batch", 1.0))
            old.append(in_process_ms(agent, p))
        if not new:
            continue
        share = h * 1e3 / median(calls) / median(new)
        overhead[p.name] = {
            "boundary_ms": median(new),
            "in_process_ms": median(old),
            "ratio": median(new) / median(old),
            "handshake_share": share,
            "calls_per_batch": median(calls),
        }
        print(
            f"  {p.name:24s} boundary {median(new):8.3f} ms  in-process {median(old):8.3f} ms  "
            f"ratio {median(new) / median(old):5.2f}  handshake/call {100 * share:6.3f} %"
        )
        shares = [v["handshake_share"] for v in overhead.values()]
        ratios = [v["ratio"] for v in overhead.values()]
        figures.update(
            handshake_share_median=median(shares),
            handshake_share_max=max(shares),
            boundary_over_in_process_median=median(ratios),
        )
        save("adversarial_bench", figures)
    figures["load_average_at_end"] = os.getloadavg()
    save("adversarial_bench", figures)
    print(
        f"caught {figures['caught']}/{len(table)}; false rejections {len(fr['rejected'])}; handshake share median "
        f"{100 * figures['handshake_share_median']:.3f} % (max {100 * figures['handshake_share_max']:.3f} %); "
        f"boundary/in-process median {figures['boundary_over_in_process_median']:.3f}"
    )


if __name__ == "__main__":
    main()
