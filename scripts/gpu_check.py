"""Every GPU check of the Triton agent in one run, for a GPU host with a stock CUDA image.

    python3 scripts/gpu_check.py [--wheels DIR] [--fib FOLDER] [--budget-s 270] [--quick] [--out FILE]

Needs only what such an image has (torch, triton, numpy, pytest) plus msgspec, installed
from `--wheels DIR` into this Python when it is missing (`--prepare-wheels DIR` downloads
them on a host with a package registry; no Ray, NATS or LanceDB is needed). In one run:

1. the `gpu`-marked tests (`pytest -m gpu tests/hardware_agents/triton`), a third of the budget;
2. every triton-suite baseline, profiled by the agent `--repeat` (3) times;
3. a FlashInfer-Bench folder named by `--fib` (e.g. the AccelOpt paper's published H100
   problems), imported as a suite (index inputs synthesized where their blobs are
   missing) and every solution of it profiled `--repeat` times; where it has `paper_latencies.json`
   the baseline -> best speedups are compared with the paper's;
4. the same kernels timed with `triton.testing.do_bench` in a plain process (no sandbox),
   as an independent witness of the agent's medians;
5. every file of the Triton adversarial corpus, checked for the status and reason its
   header names for a GPU (`expect_gpu`, else `expect`);
6. a tuner sweep: per triton-suite problem, the built-in tuner's single-step moves of its
   tunable constants (BLOCK sizes, NUM_WARPS, NUM_STAGES), profiled by the agent, greedily
   for as many steps as the budget allows: best vs baseline, and the geomean;
7. a probe of the trusted judge on the device: a CUDA tensor of this process written by a
   child of another uid through CUDA IPC; the judge's own region
   (`judge_buffers.CudaIpcBuffers`, the only place its CUDA implementation runs) opened by a
   sandboxed child as the harness opens it, written there and judged in place while the
   child is held stopped (inputs, guards, outputs); `device_compare`'s rule
   (`check_on_device`) against `compare.compare_outputs` on a 64 M-element bf16 output
   (same note and figures, both timed);
8. writes `benchmarks/results/gpu_check-<device>.json` (device, driver, versions, every
   row, the targets and whether each is met) after every step, and prints a table.

Each profile row carries both figures (`device_ms`: the calls replayed as graphs, the
latency the search optimizes; `eager_ms`: host work included; `host_bound`), the rounds
rejected and made up in the same child, the two profiles' spread, the set-ups against their
allowance, the calls' mean over their median and the solution cache's files; the witness
adds `triton.testing.do_bench_cudagraph` beside `do_bench`. `--quick` fits 3 minutes
(`--only suite,witness,corpus,probe --repeat 2`, the clock's corpus files only).

A profile that makes the agent raise is an `agent_error` row; the run goes on. Steps start
no new work once `--budget-s` is spent (rows left are `skipped (budget)`): `--merge` then
runs what is left in a second call (`--only corpus,sweep --merge`), keeping the first
call's rows.

`--interpreter` runs steps 2, 3, 5 and 6 on this host's CPU through the Triton interpreter with
the host clock (a dry run of the script itself; figures meaningless); `--only` narrows the
run to some steps (`tests,suite,corpus,fib,witness,sweep,probe`), `--problems` to some problems
(a row that failed, re-run alone; a problem's name keeps its corpus files too).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import math
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
STEPS = ("tests", "suite", "corpus", "fib", "witness", "sweep", "probe")
# --quick: what fits 3 minutes of one call: the suite twice, the witness, the corpus files of the
# clock (a slowed or forged clock, work moved before the clock or between calls), the probe
QUICK_STEPS = "suite,witness,corpus,probe"
QUICK_CORPUS = (
    "patch_timer_code",
    "slow_cuda_events_2x",
    "side_stream",
    "precompute_in_setup",
    "work_of_later_calls",
    "lazy_when_timed",
)
WHEELS = ("msgspec==0.22.0",)


# --- set-up ----------------------------------------------------------------------------------


def prepare_wheels(dest: Path, python: str) -> int:
    """Download the wheels a stock CUDA image lacks, for CPython `python` (e.g. 3.12)."""
    dest.mkdir(parents=True, exist_ok=True)
    cmd = [
        sys.executable,
        "-m",
        "pip",
        "download",
        "--only-binary=:all:",
        "--no-deps",
        "--implementation",
        "cp",
        "--python-version",
        python,
        "--platform",
        "manylinux2014_x86_64",
        "--platform",
        "manylinux_2_17_x86_64",
        "-d",
        str(dest),
        *WHEELS,
    ]
    return subprocess.call(cmd)


def ensure_deps(wheels: Path | None) -> None:
    """msgspec into this Python (site-packages, where the sandboxed children find it too)."""
    if importlib.util.find_spec("msgspec") is not None:
        return
    if wheels is None:
        sys.exit(
            "msgspec is missing: pass --wheels DIR (made by --prepare-wheels DIR on a host with a registry)"
        )
    files = sorted(wheels.glob("*.whl"))
    if not files:
        sys.exit(f"msgspec is missing and {wheels} holds no wheels (make them with --prepare-wheels)")
    if subprocess.call([sys.executable, "-m", "pip", "--version"], stdout=subprocess.DEVNULL) == 0:
        subprocess.check_call(
            [sys.executable, "-m", "pip", "install", "--no-index", "--no-deps", *map(str, files)]
        )
    else:  # a venv made without pip: a wheel is a zip of what goes into site-packages
        import sysconfig
        import zipfile

        for whl in files:
            with zipfile.ZipFile(whl) as z:
                z.extractall(sysconfig.get_paths()["platlib"])
    importlib.invalidate_caches()
    if importlib.util.find_spec("msgspec") is None:
        sys.exit(f"msgspec is still missing after installing {', '.join(f.name for f in files)}")


class Budget:
    def __init__(self, seconds: float) -> None:
        self.t0, self.seconds = time.monotonic(), seconds

    def left(self) -> float:
        return self.seconds - (time.monotonic() - self.t0)


# --- rows ------------------------------------------------------------------------------------


def profile_row(kind: str, name: str, profs: list[Any], **extra: Any) -> dict[str, Any]:
    """One row for a kernel profiled len(profs) times: the first profile's figures, every
    profile's status, wall time and phases, and the median of the medians."""
    prof = profs[0]
    c = prof.counters
    n_calls = c.get("timing_calls", 0.0) / max(c.get("trials", 1.0), 1.0)
    medians = [p.latency.median_ms for p in profs if p.latency]
    row: dict[str, Any] = {
        "kind": kind,
        "name": name,
        "status": next((p.status for p in profs if p.status != "passed"), prof.status),
        "statuses": [p.status for p in profs],
        "wall_s": round(prof.wall_s, 2),
        "walls_s": [round(p.wall_s, 2) for p in profs],
        "median_ms": statistics.median(medians) if medians else None,
        "medians_ms": medians,
        "pct_peak": prof.peak_fraction,
        "untimed_per_call_us": c.get("timing_untimed_per_call_s", 0.0) * 1e6 or None,
        "overhead_per_call_us": c.get("timing_overhead_per_call_s", 0.0) * 1e6 or None,
        "kernel_clock_over_wall": (c["timing_kernel_clock_s"] / c["timing_wall_s"])
        if c.get("timing_wall_s")
        else None,
        "checked_calls": c.get("timing_checked_calls"),
        # the device figure (each call replayed as a graph) is the latency where it exists; the
        # eager figure beside it, host-bound where it is more than 20% above
        "device_ms": c.get("device_latency_ms"),
        "eager_ms": c.get("eager_latency_ms"),
        "host_bound": bool(c.get("host_bound")) if "host_bound" in c else None,
        "graph_note": next(
            (ln[6:] for ln in prof.log.splitlines() if ln.startswith("note: eager figure only")), None
        ),
        # rounds rejected and made up by extra rounds in the same child, per profile (none re-run)
        "rounds_rejected": [p.counters.get("timing_rounds_rejected", 0.0) for p in profs],
        # two profiles of one kernel: the largest median over the smallest
        "medians_spread": (max(medians) / min(medians) - 1)
        if len(medians) > 1 and min(medians) > 0
        else None,
        # the set-ups: what the calibration's set-up allowed and what all of them took
        "setup_s": c.get("timing_setup_s"),
        "setup_allowance_s": c.get("timing_setup_allowance_s"),
        # the mean of a round's calls over the median of its reps (an uneven round is rejected at 1.25)
        "call_mean_over_median": (c["timing_call_mean_ms"] / prof.latency.median_ms)
        if c.get("timing_call_mean_ms") and prof.latency and prof.latency.median_ms
        else None,
        "solution_cache_files": [p.counters.get("solution_cache_files") for p in profs],
        # adversarial cases that passed only with the float32 floor (the tie-at-float32 class)
        "fp32_floor_cases": c.get("fp32_floor_cases"),
        "calls": c.get("timing_calls"),
        # every thread of the kernel's child confined (a CUDA driver's threads, started by the
        # warm-up before the lockdown, confine themselves one by one where Landlock has no TSYNC)
        "threads": prof.isolation.get("threads"),
        "landlock_threads": prof.isolation.get("landlock_threads"),
        "phases_s": [
            {k: round(v, 3) for k, v in p.counters.items() if k.startswith("phase_")} for p in profs
        ],
        "log": next((p.log for p in profs if p.status != "passed"), prof.log).splitlines()[0][:300]
        if prof.log
        else "",
        **extra,
    }
    row["detects_2x_slow_clock"] = detects_lie(row, n_calls, 2.0)
    row["detects_1.25x_slow_clock"] = detects_lie(row, n_calls, 1.25)
    return row


def detects_lie(row: dict[str, Any], n_calls: float, s: float) -> bool | None:
    """Whether the GPU's clock bound catches this kernel's clock slowed by s (a kernel of its
    median per call, its calibrated untimed work a call: `ClockBound.catches`)."""
    from hardware_agents.triton.rounds_judge import CLOCK_BOUNDS

    k, u = row.get("median_ms"), row.get("untimed_per_call_us")
    if not k or not u or not n_calls:
        return None
    return CLOCK_BOUNDS["cuda"].catches(s, k / 1e3, u / 1e6, int(n_calls))


# --- steps -----------------------------------------------------------------------------------


def run_gpu_tests(timeout_s: float) -> dict[str, Any]:
    t0 = time.monotonic()
    # the files that hold gpu-marked tests (others may import what a stock image lacks)
    files = sorted(
        str(p.relative_to(REPO)) for p in (REPO / "tests").rglob("test_*.py") if "mark.gpu" in p.read_text()
    )
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "pytest", "-q", "-m", "gpu", "-p", "no:cacheprovider", *files],
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=timeout_s,
        )
    except subprocess.TimeoutExpired:
        return {
            "kind": "tests",
            "name": "pytest -m gpu",
            "status": "failed",
            "wall_s": round(time.monotonic() - t0, 1),
            "log": f"timed out after {timeout_s:g} s",
        }
    tail = [ln for ln in proc.stdout.splitlines() if ln.strip()][-1:] or [proc.stderr[-300:]]
    return {
        "kind": "tests",
        "name": "pytest -m gpu",
        "status": "passed" if proc.returncode == 0 else "failed",
        "wall_s": round(time.monotonic() - t0, 1),
        "log": tail[0][:300],
    }


def profile_or_error(agent: Any, problem: Any, solution: Any) -> tuple[Any | None, str]:
    """The agent's profile, or why the agent raised instead: one row's failure, never the end
    of the only run on a lent GPU."""
    try:
        return agent.profile(problem, solution), ""
    except Exception as e:
        return None, " ".join(f"{type(e).__name__}: {e}".split())[:300]


def profiles_or_error(agent: Any, problem: Any, solution: Any, repeat: int) -> tuple[list[Any], str]:
    """`repeat` profiles of one kernel (each in a fresh child), or why the agent raised."""
    profs = []
    for _ in range(max(1, repeat)):
        prof, why = profile_or_error(agent, problem, solution)
        if prof is None:
            return [], why
        profs.append(prof)
    return profs, ""


def error_row(kind: str, name: str, why: str, **extra: Any) -> dict[str, Any]:
    return {"kind": kind, "name": name, "status": "agent_error", "log": why, **extra}


def picked(only: set[str] | None, *names: str) -> bool:
    """Whether `--problems` keeps a row about these names (a problem, a corpus file)."""
    return only is None or any(n in only for n in names)


def suite_rows(
    agent: Any, budget: Budget, only: set[str] | None = None, repeat: int = 3
) -> list[dict[str, Any]]:
    import suites

    rows = []
    for p in (p for p in suites.load_suite("triton") if picked(only, p.name)):
        if budget.left() < 30:
            rows.append({"kind": "suite", "name": p.name, "status": "skipped (budget)"})
            continue
        profs, why = profiles_or_error(agent, p, p.baseline, repeat)
        rows.append(
            profile_row("suite", p.name, profs, expected="passed")
            if profs
            else error_row("suite", p.name, why, expected="passed")
        )
    return rows


# a hack that must pass (the lie never reached the clock) must not look faster than the
# suite's baseline of the same kernel by more than this: a 2x slowed clock would be 0.5
HONEST_FLOOR = 0.8


def corpus_hacks(device_dir: str) -> list[Any]:
    """The adversarial corpus of `device_dir` (`tests/hardware_agents/adversarial/corpus.py`'s
    `load`), its loader read from its file: no folder of tests/ goes on sys.path."""
    path = REPO / "tests" / "hardware_agents" / "adversarial" / "corpus.py"
    spec = importlib.util.spec_from_file_location("accelopt_adversarial_corpus", path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load the adversarial corpus from {path}")
    corpus = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(corpus)
    return corpus.load(device_dir)


def candidate(problem: Any, source: str, name: str) -> Any:
    """The problem's baseline with its one source file replaced by `source`."""
    import msgspec

    from accelopt.problem import SourceFile

    path = problem.baseline.sources[0].path
    return msgspec.structs.replace(
        problem.baseline, name=name, author="test", sources=[SourceFile(path=path, content=source)]
    )


def corpus_rows(
    agent: Any,
    on_gpu: bool,
    budget: Budget,
    only: set[str] | None = None,
    baseline_ms: dict[str, float] | None = None,
) -> list[dict[str, Any]]:
    """Each corpus file's profile against its header's status and reason; one that must pass
    must also keep an honest latency where the suite baseline of its problem was measured."""
    import suites

    rows = []
    for hack in (h for h in corpus_hacks("triton") if picked(only, h.name, h.problem.rsplit("/", 1)[-1])):
        expect, needle = hack.expected(on_gpu)
        if budget.left() < 20:
            rows.append(
                {"kind": "corpus", "name": hack.name, "status": "skipped (budget)", "expected": expect}
            )
            continue
        p = suites.get_problem(hack.problem)
        prof, why = profile_or_error(agent, p, candidate(p, hack.source, hack.name))
        if prof is None:
            rows.append(error_row("corpus", hack.name, why, expected=expect, needle=needle, caught=False))
            continue
        text = prof.log + " ".join(c.note for c in prof.correctness)
        base = (baseline_ms or {}).get(p.name)
        vs = prof.latency.median_ms / base if base and prof.latency else None
        honest = expect != "passed" or vs is None or vs >= HONEST_FLOOR
        rows.append(
            profile_row(
                "corpus",
                hack.name,
                [prof],
                expected=expect,
                needle=needle,
                vs_baseline=vs,
                caught=hack.accepts(prof.status, text, on_gpu) and honest,
            )
        )
    return rows


def fib_problems(folder: Path) -> tuple[list[Any], dict[str, Any], list[str]]:
    from suites.flashinfer import TraceSet, problems_from

    ts = TraceSet.load(folder)
    # index blobs synthesized; a workload missing another blob is dropped (a note), not the run
    problems = problems_from(ts, synthesize_indices=True, skip_missing_blobs=True)
    return problems, ts.solutions, ts.notes


def fib_pairs(folder: Path, only: set[str] | None = None) -> list[tuple[Any, Any]]:
    """(problem, solution) for every solution of the folder, problems in its order."""
    problems, solutions, _ = fib_problems(folder)
    return [
        (p, sol)
        for p in problems
        if picked(only, p.name)
        for sol in sorted((s for s in solutions.values() if s.definition == p.name), key=lambda s: s.name)
    ]


def fib_rows(
    agent: Any, folder: Path, budget: Budget, only: set[str] | None = None, repeat: int = 3
) -> list[dict[str, Any]]:
    rows = []
    for p, sol in fib_pairs(folder, only):
        name = f"{p.name}/{sol.name}"
        if budget.left() < 30:
            rows.append({"kind": "fib", "name": name, "status": "skipped (budget)"})
            continue
        role = "baseline" if sol.name == p.baseline.name else "other"
        profs, why = profiles_or_error(agent, p, sol, repeat)
        extra = {"expected": "passed", "problem": p.name, "solution": sol.name, "role": role}
        rows.append(
            profile_row("fib", name, profs, **extra) if profs else error_row("fib", name, why, **extra)
        )
    return rows


def paper_speedups(folder: Path, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The paper's baseline -> best speedups (its `paper_latencies.json`) against ours."""
    path = folder / "paper_latencies.json"
    if not path.exists():
        return []
    out = []
    by = {(r.get("problem"), r.get("solution")): r for r in rows if r["kind"] == "fib"}
    for entry in json.loads(path.read_text()):
        d = entry["definition"]
        base = by.get((d, entry["baseline_solution"]))
        best = next(
            (r for (pd, _), r in by.items() if pd == d and r is not base and r.get("median_ms")), None
        )
        ours = (
            (base["median_ms"] / best["median_ms"])
            if base and best and base.get("median_ms") and best.get("median_ms")
            else None
        )
        paper = entry["baseline_ms"] / entry["accelopt_best_ms"]
        out.append(
            {
                "kind": "paper",
                "name": d,
                "paper_speedup": round(paper, 3),
                "agent_speedup": round(ours, 3) if ours else None,
                "within_15pct": ours is not None and abs(ours / paper - 1) <= 0.15,
                "paper_baseline_ms": entry["baseline_ms"],
                "paper_best_ms": entry["accelopt_best_ms"],
            }
        )
    return out


def witness_rows(items: list[tuple[str, Any, Any]], budget: Budget) -> list[dict[str, Any]]:
    """do_bench medians of (name, problem, solution), in a plain child process."""
    import msgspec

    spec = [
        {"name": n, "problem": msgspec.json.encode(p).decode(), "solution": msgspec.json.encode(s).decode()}
        for n, p, s in items
    ]
    with tempfile.TemporaryDirectory() as tmp:
        req = Path(tmp) / "witness.json"
        req.write_text(json.dumps(spec))
        try:
            proc = subprocess.run(
                [sys.executable, __file__, "--witness", str(req)],
                cwd=REPO,
                capture_output=True,
                text=True,
                timeout=max(60.0, budget.left()),
            )
            stdout, stderr, failed = proc.stdout, proc.stderr, proc.returncode != 0
        except subprocess.TimeoutExpired as e:  # what it measured before the budget ran out counts
            stdout, stderr, failed = _text(e.stdout), _text(e.stderr), True
    done = [json.loads(ln) for ln in stdout.splitlines() if ln.startswith("{")]
    if failed and not done:
        return [{"kind": "witness", "name": "do_bench", "status": "failed", "log": stderr[-500:]}]
    named = {w["name"] for w in done}
    return done + [
        {"kind": "witness", "name": n, "status": "skipped (budget)"} for n, _, _ in items if n not in named
    ]


def _text(out: str | bytes | None) -> str:
    return out.decode("utf-8", "replace") if isinstance(out, bytes) else (out or "")


def witness_main(path: Path) -> int:
    """The witness child: each kernel imported plainly, seed-0 inputs on the GPU, do_bench."""
    import torch
    import triton.testing

    from accelopt.problem import Problem, Solution
    from hardware_agents.pipeline import inputgen
    from hardware_agents.triton.data import input_metas, output_metas
    from hardware_agents.triton.inputs import case_inputs, torch_dtype

    for item in json.loads(path.read_text()):
        import msgspec

        p = msgspec.json.decode(item["problem"], type=Problem)
        sol = msgspec.json.decode(item["solution"], type=Solution)
        try:
            with tempfile.TemporaryDirectory() as tmp:
                pkg = Path(tmp) / f"witness_{abs(hash(item['name']))}"
                pkg.mkdir()
                (pkg / "__init__.py").write_text("")
                for src in sol.sources:
                    (pkg / src.path).parent.mkdir(parents=True, exist_ok=True)
                    (pkg / src.path).write_text(src.content)
                sys.path.insert(0, tmp)
                mod = __import__(
                    f"{pkg.name}.{sol.entry_file().path.removesuffix('.py').replace('/', '.')}",
                    fromlist=["_"],
                )
                fn = getattr(mod, sol.entry_symbol)
                tensors, scalars = case_inputs(
                    p.definition, p.workload, inputgen.InputCase(name="seed0", seed=0), ()
                )
                args: list[Any] = [
                    scalars[m.name] if m.shape is None else tensors[m.name].cuda()
                    for m in input_metas(p.definition, p.workload)
                ]
                if sol.spec.destination_passing_style:
                    args += [
                        torch.empty(tuple(o.shape or ()), dtype=torch_dtype(o.dtype), device="cuda")
                        for o in output_metas(p.definition, p.workload)
                    ]
                ms = triton.testing.do_bench(
                    lambda fn=fn, args=args: fn(*args), warmup=25, rep=100, return_mode="median"
                )
                row = {"kind": "witness", "name": item["name"], "status": "ok", "median_ms": float(ms)}
                try:  # the device figure's witness: the same calls replayed in a CUDA graph
                    gms = triton.testing.do_bench_cudagraph(lambda fn=fn, args=args: fn(*args), rep=100)
                    row["graph_median_ms"] = float(gms)
                except Exception as e:  # a wrapper that cannot be captured: the agent times it eagerly
                    row["graph_log"] = f"{type(e).__name__}: {e}"[:200]
        except Exception as e:  # one kernel's failure is a row, not the end of the run
            row = {
                "kind": "witness",
                "name": item["name"],
                "status": "failed",
                "log": f"{type(e).__name__}: {e}"[:300],
            }
        print(json.dumps(row), flush=True)
    return 0


def sweep_rows(
    agent: Any, budget: Budget, steps: int = 2, only: set[str] | None = None
) -> list[dict[str, Any]]:
    """The tuner's single-step moves per triton-suite problem, greedily from the baseline."""
    import msgspec

    import suites
    from accelopt.problem import SourceFile
    from hardware_agents.languages.tunables import apply_change, find_tunables, moves

    rows: list[dict[str, Any]] = []
    for p in (p for p in suites.load_suite("triton") if picked(only, p.name)):
        if budget.left() < 40:
            rows.append({"kind": "sweep", "name": p.name, "status": "skipped (budget)"})
            continue
        entry = p.baseline.entry_file()
        best_src = entry.content
        base, why = profile_or_error(agent, p, p.baseline)
        if base is None:
            rows.append(error_row("sweep", p.name, why))
            continue
        best_ms = base.latency.median_ms if base.status == "passed" and base.latency else None
        base_ms, tried, trail = best_ms, 0, []
        seen = {best_src}  # no move back to a kernel already profiled
        for _ in range(steps if best_ms else 0):
            improved = None
            for t in find_tunables(best_src):
                for ch in moves(t, None):
                    if budget.left() < 30:
                        break
                    src = apply_change(best_src, ch)
                    if src is None or src in seen:
                        continue
                    seen.add(src)
                    sol = msgspec.structs.replace(
                        p.baseline,
                        name=f"{p.name}-{ch.name}-{ch.new}",
                        sources=[
                            SourceFile(path=s.path, content=src if s.path == entry.path else s.content)
                            for s in p.baseline.sources
                        ],
                    )
                    prof, _ = profile_or_error(agent, p, sol)
                    tried += 1
                    if (
                        prof is not None
                        and prof.status == "passed"
                        and prof.latency
                        and prof.latency.median_ms < (improved[0] if improved else best_ms)
                    ):
                        improved = (prof.latency.median_ms, src, f"{ch.name} {ch.old}->{ch.new}")
            if improved is None:
                break
            best_ms, best_src = improved[0], improved[1]
            trail.append(improved[2])
        rows.append(
            {
                "kind": "sweep",
                "name": p.name,
                "status": base.status,
                "baseline_ms": base_ms,
                "best_ms": best_ms,
                "speedup": (base_ms / best_ms) if base_ms and best_ms else None,
                "moves_profiled": tried,
                "path": trail,
            }
        )
    return rows


# --- report ----------------------------------------------------------------------------------


def previous_rows(path: Path) -> list[dict[str, Any]]:
    """The rows of an earlier run's results file (none if there is none)."""
    if not path.exists():
        return []
    try:
        return list(json.loads(path.read_text())["rows"])
    except (ValueError, KeyError, TypeError) as e:
        sys.exit(f"--merge: {path} is not a gpu_check results file ({e}); move it away or drop --merge")


def attach_witness(rows: list[dict[str, Any]], witness: list[dict[str, Any]]) -> None:
    by = {w["name"]: w for w in witness}
    for r in rows:
        w = by.get(r["name"])
        if w and w.get("median_ms") and r.get("median_ms"):
            r["do_bench_ms"] = w["median_ms"]
            r["agent_over_do_bench"] = r["median_ms"] / w["median_ms"]
        if w and w.get("graph_median_ms"):
            r["do_bench_graph_ms"] = w["graph_median_ms"]
            if r.get("device_ms"):
                r["device_over_do_bench_graph"] = r["device_ms"] / w["graph_median_ms"]
            if r.get("eager_ms") and w.get("median_ms"):
                r["eager_over_do_bench"] = r["eager_ms"] / w["median_ms"]


def targets(rows: list[dict[str, Any]]) -> dict[str, Any]:
    def of(kind: str) -> list[dict[str, Any]]:
        return [r for r in rows if r["kind"] == kind]

    honest = (*of("suite"), *of("fib"))
    timed = [r for r in honest if r.get("agent_over_do_bench") and r["median_ms"] >= 0.05]
    long = [r for r in honest if r.get("median_ms") and r["median_ms"] >= 0.1]
    sweep = [r["speedup"] for r in of("sweep") if r.get("speedup")]
    walls = sorted(w for r in honest for w in r.get("walls_s", []))
    warm = sorted(w for r in honest for w in r.get("walls_s", [])[1:])  # the problem's data already built

    def pct(xs: list[float], q: float) -> float | None:
        return xs[min(len(xs) - 1, int(q * len(xs)))] if xs else None

    statuses = [s for r in honest for s in r.get("statuses", [r["status"]])]
    device = [r for r in honest if r.get("device_over_do_bench_graph") and r["median_ms"] >= 0.05]
    spreads = [r["medians_spread"] for r in honest if r.get("medians_spread") is not None]
    rejected = [x for r in honest for x in r.get("rounds_rejected", [])]
    calls = [r["call_mean_over_median"] for r in honest if r.get("call_mean_over_median")]
    whole = [r.get("elapsed_s") for r in rows if r["kind"] == "run"]

    close = [abs(r["device_over_do_bench_graph"] - 1) <= 0.05 for r in device]

    def met(ok: bool | None) -> str:
        return "" if ok is None else (" (target met)" if ok else " (target NOT met)")

    median, p90 = (statistics.median(walls) if walls else None), pct(walls, 0.9)
    return {
        # the targets, each with its figure and whether it is met
        "target_profile_wall_median_le_2.5s": f"{median}{met(median <= 2.5 if median else None)}",
        "target_profile_wall_p90_le_8s": f"{p90}{met(p90 <= 8 if p90 else None)}",
        "target_device_within_5pct_of_do_bench_cudagraph": f"{sum(close)}/{len(close)} kernels of 0.05 ms "
        f"or more{met(all(close) if close else None)}",
        "target_two_profiles_within_3pct": f"{sum(x <= 0.03 for x in spreads)}/{len(spreads)} kernels"
        f"{met(all(x <= 0.03 for x in spreads) if spreads else None)}",
        "target_no_confirmation_reprofiles": "0 (confirmation is in the child: rounds rejected and made up "
        f"{sum(x > 0 for x in rejected)} of {len(rejected)} honest profiles, {sum(rejected):g} rounds in all)",
        "host_bound_kernels": sorted(r["name"] for r in honest if r.get("host_bound")),
        "not_captured_kernels": sorted(r["name"] for r in honest if r.get("graph_note")),
        "call_mean_over_median_max": max(calls) if calls else None,
        "whole_check_s": whole[0] if whole else None,
        "suite_baselines_passed": f"{sum(r['status'] == 'passed' for r in of('suite'))}/{len(of('suite'))}",
        "fib_kernels_passed": f"{sum(r['status'] == 'passed' for r in of('fib'))}/{len(of('fib'))}",
        "corpus_caught": f"{sum(bool(r.get('caught')) for r in of('corpus'))}/{len(of('corpus'))}",
        "honest_rejected": f"{sum(s not in ('passed', 'skipped (budget)') for s in statuses)} of "
        f"{len(statuses)} profiles",
        "agent_within_10pct_of_do_bench": f"{sum(abs(r['agent_over_do_bench'] - 1) <= 0.10 for r in timed)}"
        f"/{len(timed)} (kernels of 0.05 ms or more)",
        "paper_speedups_within_15pct": f"{sum(r['within_15pct'] for r in of('paper'))}/{len(of('paper'))}",
        "profile_wall_s_median": statistics.median(walls) if walls else None,
        "profile_wall_s_p90": pct(walls, 0.9),
        "profile_wall_s_warm_median": statistics.median(warm) if warm else None,
        "profile_wall_s_warm_p90": pct(warm, 0.9),
        "sweep_geomean_speedup": math.exp(statistics.fmean(math.log(s) for s in sweep)) if sweep else None,
        "slow_clock_2x_caught": f"{sum(bool(r.get('detects_2x_slow_clock')) for r in honest)}"
        f"/{sum(r.get('detects_2x_slow_clock') is not None for r in honest)} suite and paper kernels",
        "slow_clock_1.25x_caught": f"{sum(bool(r.get('detects_1.25x_slow_clock')) for r in long)}"
        f"/{sum(r.get('detects_1.25x_slow_clock') is not None for r in long)} kernels of 0.1 ms or more",
        # the CUDA driver's threads started before the lockdown, confined one by one (no TSYNC)
        "children_every_thread_confined": f"{sum('each confined' in (r.get('threads') or '') for r in honest)}"
        f"/{len(honest)} suite and paper profiles (threads: "
        f"{sorted({(r.get('threads') or '?').split(' ', 1)[0] for r in honest})})",
    }


def _cell(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    return "" if value is None else str(value)[:60]


def print_table(rows: list[dict[str, Any]], goals: dict[str, Any]) -> None:
    cols = ("kind", "name", "status", "median_ms", "do_bench_ms", "pct_peak", "untimed_per_call_us", "wall_s")
    print(" | ".join((*cols, "note")))
    for r in rows:
        note = r.get("log", "") if r.get("status") not in ("passed", "ok") else ""
        if r["kind"] == "corpus":
            note = f"expected {r.get('expected')}: {'ok' if r.get('caught') else 'MISSED'}"
            if r.get("vs_baseline") is not None:
                note += f", {r['vs_baseline']:.2f}x the baseline's median"
            if r.get("status") == "agent_error":
                note += f" ({r.get('log')})"
        if r["kind"] == "sweep":
            note = f"{r.get('speedup') or 0:.2f}x via {', '.join(r.get('path', [])) or '-'}"
        if r["kind"] == "paper":
            note = f"paper {r['paper_speedup']}x, agent {r['agent_speedup']}x"
        print(" | ".join([*(_cell(r.get(c)) for c in cols), _cell(note)]))
    print("\ntargets:")
    for k, v in goals.items():
        print(f"  {k}: {v}")


def versions(on_gpu: bool) -> dict[str, Any]:
    import torch
    import triton

    out: dict[str, Any] = {
        "torch": torch.__version__,
        "triton": triton.__version__,
        "python": platform.python_version(),
        "cuda": torch.version.cuda,
    }
    try:
        smi = (
            subprocess.run(
                ["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"],
                capture_output=True,
                text=True,
                timeout=20,
            )
            .stdout.strip()
            .splitlines()
        )
        out["device"], out["driver"] = [x.strip() for x in smi[0].split(",")][:2]
    except (OSError, subprocess.SubprocessError, IndexError, ValueError):
        out["device"] = "cpu (Triton interpreter)" if not on_gpu else "unknown GPU"
    return out


def _ipc_child(q: Any, back: Any) -> None:
    """The probe's child: drops to another uid (as the kernel's sandbox does), then opens the
    parent's CUDA tensor through CUDA IPC and writes it."""
    if os.getuid() == 0:
        os.setgid(65534)
        os.setuid(65534)
    import torch

    try:
        t = q.get(timeout=60)
        t.fill_(1.0)
        torch.cuda.synchronize()
        back.put(f"ok (uid {os.getuid()})")
    except Exception as e:
        back.put(f"{type(e).__name__}: {e}"[:200])


def _sync(device: str) -> None:
    if device == "cuda":
        import torch

        torch.cuda.synchronize()


def judge_buffers_child(payload: bytes, workdir: Path) -> str:
    """The sandboxed child of the `judge_buffers_cuda_ipc` probe: opens the judge's region as
    the harness does, reads its input, writes its output and one byte past the output's end
    (into the guard), then stops itself for the judge's reads."""
    import signal

    import msgspec
    import torch

    from hardware_agents.triton.judge_buffers import open_buffers
    from hardware_agents.triton.records import BufferHandle

    t0 = time.perf_counter()
    bufs = open_buffers(msgspec.msgpack.decode(payload, type=BufferHandle))
    opened_ms = (time.perf_counter() - t0) * 1e3
    x, out = bufs.view("x"), bufs.view("out")
    out.copy_(x * 2)
    flat = out.reshape(-1).view(torch.uint8)
    bufs.base[flat.data_ptr() - bufs.base.data_ptr() + flat.numel()] = 0x5A  # the guard's first byte
    _sync(x.device.type)
    os.kill(os.getpid(), signal.SIGSTOP)
    return f"opened in {opened_ms:.1f} ms (uid {os.getuid()})"


def judge_buffers_row(device: str = "cuda") -> dict[str, Any]:
    """The judge's region on the GPU: a sandboxed child (another uid, Landlock, seccomp) opens
    it through CUDA IPC and writes it; the judge reads it while the child is stopped.
    (`device` "cpu": the same over shared memory, a dry run of this row on a CPU host.)"""
    import torch

    from hardware_agents.sandbox import Sandbox, SandboxPolicy
    from hardware_agents.triton.gpu import device_nodes
    from hardware_agents.triton.judge_buffers import CudaIpcBuffers, JudgeBuffers, SharedMemoryBuffers, layout

    row: dict[str, Any] = {"kind": "probe", "name": "judge_buffers_cuda_ipc", "status": "failed"}
    n = 1 << 20
    slots, size = layout([("x", "float32", [n], True), ("out", "float32", [n], True)])
    bufs: JudgeBuffers = (
        CudaIpcBuffers(slots, size, torch.device("cuda:0"))
        if device == "cuda"
        else SharedMemoryBuffers(slots, size)
    )
    x = torch.randn(n, device=device)
    bufs.write("x", x)
    bufs.poison("out")
    _sync(device)
    policy = SandboxPolicy(
        wall_timeout_s=120,
        address_space_bytes=1 << 44,
        max_processes=256,
        write_paths=tuple(device_nodes()),
        python_path=(str(REPO / "scripts"),),
    )
    with Sandbox(policy) as box:
        import msgspec

        child = box.spawn(
            "gpu_check:judge_buffers_child", msgspec.msgpack.encode(bufs.handle), pass_fds=bufs.pass_fds
        )
        try:
            if not child.wait_stopped():
                out = child.finish()
                row["log"] = f"the child ended before its stop: {out.status} {out.error}"[:400]
                return row
            t0 = time.perf_counter()
            written = bool(torch.equal(bufs.view("out"), x * 2))
            inputs_kept = bufs.unchanged("x", x)
            guard_caught = not bufs.guards_intact("out")
            _sync(device)
            row["judge_ms"] = round((time.perf_counter() - t0) * 1e3, 2)
            row["frozen"] = child.check_frozen() is None
            child.resume()
            child.wait_stopped()
        finally:
            out = child.finish()
    said = out.decode(str) if out.status == "ok" else f"{out.status}: {out.error}"[:300]
    row.update(
        {
            "written": written,
            "inputs_unchanged": inputs_kept,
            "guard_write_caught": guard_caught,
            "log": said,
            "status": "ok"
            if written and inputs_kept and guard_caught and row["frozen"] and out.status == "ok"
            else "failed",
        }
    )
    return row


def check_on_device_row(n: int = 64 << 20, device: str = "cuda") -> dict[str, Any]:
    """`device_compare.check_on_device` against `compare.compare_outputs` on a 64 M-element
    bf16 output with a few planted misses: the same verdict, note and figures, both timed
    (`n` and `device`: a smaller dry run of this row on a CPU host)."""
    import torch

    from accelopt.problem import Tolerance
    from hardware_agents.pipeline import compare
    from hardware_agents.triton.device_compare import RefNorm, check_on_device

    tol = Tolerance(rel_l2=1e-2, atol=1e-2, rtol=1e-2)
    ref = torch.randn(n, device=device, dtype=torch.float64).to(torch.bfloat16)
    got = (ref.double() * (1 + 1e-3 * torch.randn(n, device=device, dtype=torch.float64))).to(torch.bfloat16)
    got[12345 % n :: max(n // 7, 1)] += 1.0
    r64 = ref.double().cpu().numpy()
    st = compare.RefStats(r64, tol)
    norm = RefNorm(norm=st.norm, rms=st.rms, atol=st.atol, finite=st.finite)
    _sync(device)
    t0 = time.perf_counter()
    dev = check_on_device("c", {"o": got}, {"o": ref}, tol, stats={"o": norm})
    _sync(device)
    device_ms = (time.perf_counter() - t0) * 1e3
    t1 = time.perf_counter()
    host = compare.compare_outputs("c", {"o": got.double().cpu().numpy()}, {"o": r64}, tol, stats={"o": st})
    host_ms = (time.perf_counter() - t1) * 1e3
    same = dev.passed == host.passed and dev.note == host.note and dev.max_abs_err == host.max_abs_err
    same = same and abs((dev.rel_l2 or 0) - (host.rel_l2 or 0)) <= 1e-9 * max(host.rel_l2 or 0, 1e-300)
    return {
        "kind": "probe",
        "name": "check_on_device_64M",
        "status": "ok" if same else "failed",
        "device_ms": round(device_ms, 2),
        "host_ms": round(host_ms, 2),
        "log": f"device: {dev.note or 'passed'} | host: {host.note or 'passed'}"[:400],
    }


def probe_rows() -> list[dict[str, Any]]:
    """What the trusted judge on the device needs and this CPU could not show: a tensor the
    trusted side owns, written by a child of another uid through CUDA IPC; the judge's own
    region opened by a sandboxed child (`judge_buffers_row`); the comparison of a
    production-size output on the device against today's host path (`check_on_device_row`)."""
    import torch
    import torch.multiprocessing as mp

    rows: list[dict[str, Any]] = []
    t0 = time.monotonic()
    try:
        ctx = mp.get_context("spawn")
        q, back = ctx.Queue(), ctx.Queue()
        buf = torch.zeros(1 << 20, device="cuda")
        child = ctx.Process(target=_ipc_child, args=(q, back))
        child.start()
        q.put(buf)
        said = back.get(timeout=120)
        child.join(30)
        torch.cuda.synchronize()
        ok = bool((buf == 1).all())
        rows.append(
            {
                "kind": "probe",
                "name": "cuda_ipc_into_a_child_of_another_uid",
                "status": "ok" if ok and said.startswith("ok") else "failed",
                "log": said,
                "wall_s": round(time.monotonic() - t0, 2),
            }
        )
    except Exception as e:
        rows.append(
            {
                "kind": "probe",
                "name": "cuda_ipc_into_a_child_of_another_uid",
                "status": "failed",
                "log": f"{type(e).__name__}: {e}"[:300],
            }
        )
    for make, name in (
        (judge_buffers_row, "judge_buffers_cuda_ipc"),
        (check_on_device_row, "check_on_device_64M"),
    ):
        try:
            rows.append(make())
        except Exception as e:
            rows.append(
                {"kind": "probe", "name": name, "status": "failed", "log": f"{type(e).__name__}: {e}"[:300]}
            )
    return rows


def witness_step(
    rows: list[dict[str, Any]], fib: Path | None, budget: Budget, only: set[str] | None
) -> list[dict[str, Any]]:
    """`do_bench` in a plain process on the suite's baselines (and the paper's kernels): its
    medians go onto the rows they witness; what it could not measure comes back as rows."""
    import suites

    items = [(p.name, p, p.baseline) for p in suites.load_suite("triton") if picked(only, p.name)]
    if fib:
        items += [(f"{p.name}/{s.name}", p, s) for p, s in fib_pairs(fib, only)]
    witness = witness_rows(items, budget)
    attach_witness(rows, witness)
    return [w for w in witness if w.get("status") != "ok"]


def arg_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--wheels", type=Path, help="folder of wheels to install when msgspec is missing")
    ap.add_argument("--prepare-wheels", type=Path, help="download those wheels into this folder and exit")
    ap.add_argument("--python", default="3.12", help="CPython version the wheels are for (--prepare-wheels)")
    ap.add_argument("--fib", type=Path, help="a FlashInfer-Bench folder to import and profile")
    ap.add_argument(
        "--budget-s",
        type=float,
        default=270.0,
        help="stop starting work after this many seconds (one call <= 5 min)",
    )
    ap.add_argument("--repeat", type=int, default=3, help="profiles of each suite and paper kernel")
    ap.add_argument(
        "--out", type=Path, help="results JSON (default benchmarks/results/gpu_check-<device>.json)"
    )
    ap.add_argument("--only", default=",".join(STEPS), help=f"comma-separated steps of {', '.join(STEPS)}")
    ap.add_argument(
        "--problems", help="comma-separated problem (or corpus file) names: re-run only their rows"
    )
    ap.add_argument(
        "--merge",
        action="store_true",
        help="keep the rows of the results file already there; the rows measured now replace theirs",
    )
    ap.add_argument("--interpreter", action="store_true", help="dry run on the CPU (Triton interpreter)")
    ap.add_argument(
        "--quick",
        action="store_true",
        help=f"fits 3 minutes: --only {QUICK_STEPS} --repeat 2 --budget-s 160, the clock's corpus files only",
    )
    ap.add_argument("--witness", type=Path, help=argparse.SUPPRESS)
    return ap


def main(argv: list[str] | None = None) -> int:
    """Long because it is the run's one sequence: set-up, the steps in the order the witness
    needs, the results file saved after each, the table."""
    args = arg_parser().parse_args(argv)
    if args.prepare_wheels:
        return prepare_wheels(args.prepare_wheels, args.python)
    ensure_deps(args.wheels)
    if args.witness:
        return witness_main(args.witness)
    os.environ.setdefault("ACCELOPT_CACHE_DIR", str(Path(tempfile.gettempdir()) / "accelopt-gpu-check"))
    if args.quick:
        args.only, args.repeat, args.budget_s = QUICK_STEPS, 2, min(args.budget_s, 160.0)
    steps = set(args.only.split(","))
    only = set(args.problems.split(",")) if args.problems else None
    budget = Budget(args.budget_s)
    from hardware_agents.triton import get_agent_for_host
    from hardware_agents.triton.agent import TritonAgent

    agent, on_gpu = get_agent_for_host(interpreter=args.interpreter)
    assert isinstance(agent, TritonAgent)
    info = versions(on_gpu)
    print(
        f"gpu_check on {info.get('device')} (driver {info.get('driver', '-')}), torch {info['torch']}, triton "
        f"{info['triton']}, agent kind {agent.kind}, mode {agent.mode}",
        flush=True,
    )
    slug = "".join(ch if ch.isalnum() else "-" for ch in str(info.get("device", "gpu"))).strip("-").lower()
    out = args.out or REPO / "benchmarks" / "results" / f"gpu_check-{slug}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    rows: list[dict[str, Any]] = previous_rows(out) if args.merge else []

    def save() -> dict[str, Any]:  # after every step: a run cut short keeps what it measured
        goals = targets(rows)
        out.write_text(
            json.dumps(
                {
                    "benchmark": "gpu_check",
                    "versions": info,
                    "mode": agent.mode,
                    "budget_s": args.budget_s,
                    "elapsed_s": round(args.budget_s - budget.left(), 1),
                    "targets": goals,
                    "rows": rows,
                },
                indent=1,
                default=str,
            )
            + "\n"
        )
        return goals

    def add(new: list[dict[str, Any]]) -> None:  # a row measured again replaces the earlier one
        keys = {(r["kind"], r["name"]) for r in new}
        rows[:] = [r for r in rows if (r["kind"], r["name"]) not in keys] + new
        save()

    # the order puts what the witness compares first; the corpus and the sweep take what is left
    try:
        if "tests" in steps and on_gpu:
            add([run_gpu_tests(timeout_s=max(60.0, budget.left() / 3))])
        if "suite" in steps:
            add(suite_rows(agent, budget, only, args.repeat))
        if "fib" in steps and args.fib:
            add(fib_rows(agent, args.fib, budget, only, args.repeat))
            add(paper_speedups(args.fib, [r for r in rows if r["kind"] == "fib"]))
        if "witness" in steps and on_gpu:
            add(witness_step(rows, args.fib, budget, only))
        if "corpus" in steps:
            suite_ms = {
                r["name"]: r["median_ms"] for r in rows if r["kind"] == "suite" and r.get("median_ms")
            }
            corpus_only = (only or set()) | set(QUICK_CORPUS) if args.quick else only
            add(corpus_rows(agent, on_gpu, budget, corpus_only, suite_ms))
        if "sweep" in steps:
            add(sweep_rows(agent, budget, only=only))
        if "probe" in steps and on_gpu:
            add(probe_rows())
        add(
            [
                {
                    "kind": "run",
                    "name": "whole check",
                    "status": "ok",
                    "elapsed_s": round(args.budget_s - budget.left(), 1),
                }
            ]
        )
    finally:
        agent.close()
        goals = save()
    print_table(rows, goals)
    print(f"\nwrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
