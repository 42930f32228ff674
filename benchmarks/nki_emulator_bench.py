"""NKI emulator benchmark: the 14 NKIBench operators at NKIBench's shapes, in the emulator.

    .venv/bin/python benchmarks/nki_emulator_bench.py [--nkibench DIR] [--problems a,b] [--out NAME]

Per problem (one call, seed 0, the problem's own input distributions): the baseline kernel
traced into a program (compile), re-validated as the agent does, its liveness analysed,
priced by the trn1 cost model, and executed with numpy; its output judged against the
float64 reference with the suite's tolerance. Reports the emulation time per kernel, the
instruction instances executed per second, the emulated FLOP rate (the roofline's FLOPs),
the peak on-chip memory, and the cost model's ESTIMATE with its per-engine breakdown and
estimated % of peak: the engines' bound (perfect overlap), the critical path of the
dependence-aware schedule and what it adds, per loop its initiation interval and what limits
it, and cost model 1's estimate of the same program for comparison.

Kernels: by default the NKIBench-style baselines of tests/hardware_agents/neuron/
nkibench_kernels.py; with `--nkibench DIR`, the kernels of an NKIBench folder (as
`accelopt suite import-nkibench DIR` reads it). Results: benchmarks/results/<out>.json.
"""

from __future__ import annotations

import argparse
import math
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests" / "hardware_agents" / "neuron"))

import accelopt  # noqa: E402,F401  (environment defaults)
import suites  # noqa: E402
from benchmarks._common import save  # noqa: E402
from hardware_agents.neuron.emulator import ArgSpec, compile_kernel, install  # noqa: E402
from hardware_agents.neuron.emulator.analysis import analyze  # noqa: E402
from hardware_agents.neuron.emulator.cost import TRN1_COST_V1, estimate  # noqa: E402
from hardware_agents.neuron.emulator.execute import execute  # noqa: E402
from hardware_agents.neuron.emulator.program import decode, encode  # noqa: E402
from hardware_agents.neuron.emulator.validate import check_program  # noqa: E402
from hardware_agents.neuron.reference import ReferenceModule  # noqa: E402
from hardware_agents.neuron.specs import TRN1  # noqa: E402
from hardware_agents.pipeline import compare, inputgen, numpy_ref  # noqa: E402
from hardware_agents.pipeline.device_spec import roofline_terms, t_peak  # noqa: E402
from suites.nkibench import NKIBENCH_PROBLEMS, import_nkibench  # noqa: E402


def fixture_folder(dst: Path) -> Path:
    from nkibench_fixture import CATALOG, FixtureProblem, write_nkibench
    from nkibench_kernels import KERNELS, TO_NKI

    probs = [
        FixtureProblem(
            **{**CATALOG[n].__dict__, "kernel": KERNELS[n], **({"to_nki": TO_NKI[n]} if n in TO_NKI else {})}
        )
        for n in NKIBENCH_PROBLEMS
    ]
    write_nkibench(dst, probs)
    return dst


def load_kernel(problem: suites.Problem):
    import importlib.util

    install()
    src = problem.baseline.sources[0].content
    path = Path(tempfile.mkdtemp(prefix="nki-bench-")) / "kernel.py"
    path.write_text(src)
    spec = importlib.util.spec_from_file_location(f"bench_{problem.name}", path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return getattr(mod, problem.baseline.entry_symbol)


def bench(problem: suites.Problem) -> dict:
    ref_mod = ReferenceModule(problem)
    case = inputgen.input_cases(problem.definition, (0,))[0]
    inputs = inputgen.make_inputs(problem, case)
    args = ref_mod.kernel_args(inputs)
    kernel = load_kernel(problem)
    t0 = time.perf_counter()
    prog = compile_kernel(kernel, [ArgSpec.of(a) for a in args])
    t1 = time.perf_counter()
    blob = encode(prog)
    prog = decode(blob)
    check_program(prog)
    t2 = time.perf_counter()
    an = analyze(prog)
    est = estimate(prog, "trn1", an)
    t3 = time.perf_counter()
    v1 = estimate(prog, "trn1", an, spec=TRN1_COST_V1)
    outs = execute(prog, [a if isinstance(a, np.ndarray) else None for a in args], an)
    t4 = time.perf_counter()
    refs = numpy_ref.reference_outputs(problem, inputs)
    got = ref_mod.kernel_outputs(tuple(outs) if prog.returned_tuple else outs[0], refs)
    tol = compare.tolerance_of(problem.definition)
    rel = {
        n: float(np.linalg.norm(got[n].astype(np.float64) - r)) / max(float(np.linalg.norm(r)), 1e-30)
        for n, r in refs.items()
    }
    terms = roofline_terms(problem)
    tp, bound = t_peak(problem, TRN1)
    flops = terms.flops_matmul + terms.flops_vector
    exec_s = t4 - t3
    return {
        "problem": problem.name,
        "axes": problem.axis_values(),
        "correct": all(v < tol.rel_l2 for v in rel.values()),
        "rel_l2": rel,
        "rel_tol": tol.rel_l2,
        "compile_s": round(t1 - t0, 3),
        "validate_s": round(t2 - t1, 3),
        "analyze_and_estimate_s": round(t3 - t2, 3),
        "execute_s": round(exec_s, 2),
        "emulate_total_s": round(t4 - t0, 2),
        "program_bytes": len(blob),
        "instructions": an.steps,
        "instructions_per_s": round(an.steps / exec_s),
        "emulated_gflop_per_s": round(flops / exec_s / 1e9, 2),
        "peak_sbuf_bytes_per_partition": an.peak_sbuf,
        "peak_psum_bytes_per_partition": an.peak_psum,
        "estimate": {
            "latency_ms": round(est.latency_s * 1e3, 4),
            "bound": est.bound,
            "engines_ms": {k: round(v * 1e3, 4) for k, v in est.engines_s.items()},
            "hbm_mb": round(est.hbm_bytes / 1e6, 2),
            "spill_mb": round(est.spill_bytes / 1e6, 2),
            "t_peak_ms": round(tp * 1e3, 4),
            "roofline_bound": bound,
            "pct_peak": round(tp / est.latency_s, 4),
            "model": est.model,
            "engines_bound_ms": round(est.resource_s * 1e3, 4),
            "critical_path_ms": round(est.critical_path_s * 1e3, 4),
            "dependency_ms": round(est.dependency_s * 1e3, 4),
            "fixed_ms": round(est.fixed_s * 1e3, 4),
            "engine_overlap": round(est.overlap, 3),
            "loops": [
                {
                    "line": lp.line,
                    "kind": lp.kind,
                    "trip": lp.trip,
                    "iteration_us": round(lp.iteration_s * 1e6, 3),
                    "ii_us": round(lp.ii_s * 1e6, 3),
                    "engines_ii_us": round(lp.engines_ii_s * 1e6, 3),
                    "limit": lp.limit,
                    "in_flight": lp.in_flight,
                    "total_ms": round(lp.total_s * 1e3, 4),
                }
                for lp in est.loops
            ],
            "model_1": {
                "latency_ms": round(v1.latency_s * 1e3, 4),
                "bound": v1.bound,
                "engines_ms": {k: round(v * 1e3, 4) for k, v in v1.engines_s.items()},
                "spill_mb": round(v1.spill_bytes / 1e6, 2),
            },
        },
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--nkibench", help="an NKIBench folder (default: the NKIBench-style test fixtures)")
    ap.add_argument("--problems", default="", help="comma-separated subset")
    ap.add_argument("--out", default="nki_emulator_bench")
    a = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="nki-emulator-bench-"))
    src = Path(a.nkibench) if a.nkibench else fixture_folder(tmp / "src")
    report = import_nkibench(src, tmp / "suite", name="nkibench-bench")
    problems = {p.name: p for p in suites.load_suite(report.out)}
    names = [n for n in (a.problems.split(",") if a.problems else sorted(problems)) if n]
    rows = []
    for n in names:
        row = bench(problems[n])
        rows.append(row)
        e = row["estimate"]
        print(
            f"{n:24s} correct={row['correct']} rel_l2={max(row['rel_l2'].values()):.2e} "
            f"emulate={row['emulate_total_s']:7.1f}s "
            f"({row['instructions']} instr, {row['instructions_per_s']}/s) est={e['latency_ms']:.3f} ms "
            f"{e['bound']}-bound {e['pct_peak'] * 100:.1f}% of peak (model 1: {e['model_1']['latency_ms']:.3f} ms)",
            flush=True,
        )
    pcts = [r["estimate"]["pct_peak"] for r in rows]
    save(
        a.out,
        {
            "kernels": "NKIBench folder " + str(a.nkibench)
            if a.nkibench
            else "tests/hardware_agents/neuron/nkibench_kernels.py (NKIBench-style baselines)",
            "problems": rows,
            "all_correct": all(r["correct"] for r in rows),
            "max_emulate_s": max(r["emulate_total_s"] for r in rows),
            "estimated_pct_peak_geomean": round(math.exp(sum(math.log(p) for p in pcts) / len(pcts)), 4),
            "model_1_pct_peak_geomean": round(
                math.exp(
                    sum(
                        math.log(r["estimate"]["t_peak_ms"] / r["estimate"]["model_1"]["latency_ms"])
                        for r in rows
                    )
                    / len(rows)
                ),
                4,
            ),
        },
    )


if __name__ == "__main__":
    main()
