"""Measure this machine's roofline peaks once and cache them (`accelopt calibrate`).

- Memory bandwidth: a STREAM-style triad `a = b + s*c` (fp32, OpenMP, 12 bytes counted per
  element as STREAM does) at several footprints, from L2-sized to far beyond L3: a
  cache-aware bandwidth curve. `peak_bw_bytes_s` is the largest-footprint (DRAM) value.
- Matmul: numpy's sgemm (a tuned BLAS) on square fp32 matrices, best over sizes and repeats.
- Vector: an OpenMP FMA loop with enough independent accumulators to fill the pipes.

Best of many short trials everywhere: a peak is what the machine can do, and interference
only slows it. Compute peaks are also measured single-threaded and scaled by the core
count (compute scales linearly; on a shared machine a busy neighbour spoils all-thread
runs far more often than single-thread ones); each roof is the better of the two.
The measurement runs in a fresh subprocess (its own OpenMP and BLAS threads, nothing else
loaded). Results go to `<cache>/cpu/calibration-<machine key>[-quick].json`, keyed by CPU
model, usable cores and compiler. `quick=True` (tests) takes ~2 s instead of ~10 s.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import msgspec

from hardware_agents.cpu.machine import DEFAULT_CC, MachineInfo, cache_dir, machine_info, usable_cores
from hardware_agents.pipeline.device_spec import BandwidthPoint, DeviceSpec

CALIBRATION_C = r"""
#include <omp.h>
#define LANES 128

double triad(float* restrict a, const float* restrict b, const float* restrict c, long n, float s, int reps) {
    double t0 = omp_get_wtime();
    #pragma omp parallel
    for (int r = 0; r < reps; r++) {
        float sr = s + (float)r;
        #pragma omp for simd schedule(static) nowait
        for (long i = 0; i < n; i++) a[i] = b[i] + sr * c[i];
    }
    return omp_get_wtime() - t0;
}

double fma_loop(long iters, float* sink) {
    double t0 = omp_get_wtime();
    #pragma omp parallel
    {
        float acc[LANES];
        for (int j = 0; j < LANES; j++) acc[j] = 1e-3f * (float)j;
        const float m = 0.9999999f, add = 1e-7f;
        for (long i = 0; i < iters; i++) {
            #pragma omp simd
            for (int j = 0; j < LANES; j++) acc[j] = acc[j] * m + add;
        }
        float s = 0.0f;
        for (int j = 0; j < LANES; j++) s += acc[j];
        sink[omp_get_thread_num()] = s;
    }
    return omp_get_wtime() - t0;
}
"""
FMA_LANES = 128


class CalibrationRecord(msgspec.Struct, kw_only=True):
    spec: DeviceSpec
    machine: MachineInfo
    quick: bool
    created: str
    seconds: float
    triad_bytes_per_s: dict[str, float] = {}
    sgemm_flops: dict[str, float] = {}
    fma_flops: float = 0.0
    loadavg: float = 0.0  # 1-minute load when measured: busy machines under-measure peaks

    def busy(self) -> bool:
        return self.loadavg > 0.5 * self.machine.cores


class CalibrationError(RuntimeError):
    pass


def calibration_path(
    root: Path | None = None, *, quick: bool = False, machine: MachineInfo | None = None
) -> Path:
    m = machine or machine_info()
    return (root or cache_dir()) / "cpu" / f"calibration-{m.key()}{'-quick' if quick else ''}.json"


def load_calibration(root: Path | None = None, *, allow_quick: bool = True) -> CalibrationRecord | None:
    """The cached calibration for this machine: the full one, else (if allowed) the quick one."""
    for quick in (False, True) if allow_quick else (False,):
        path = calibration_path(root, quick=quick)
        try:
            return msgspec.json.decode(path.read_bytes(), type=CalibrationRecord)
        except (OSError, msgspec.DecodeError, msgspec.ValidationError):
            continue
    return None


def calibrate(
    root: Path | None = None, *, force: bool = False, quick: bool = False, cc: str = DEFAULT_CC
) -> CalibrationRecord:
    """Return the cached calibration, measuring (and caching) it first if needed or forced."""
    if not force:
        existing = load_calibration(root, allow_quick=quick)
        if existing is not None:
            return existing
    record = _measure_record(quick, cc)
    _save(record, calibration_path(root, quick=quick, machine=record.machine))
    return record


def raise_peaks(root: Path | None, old: CalibrationRecord, *, cc: str = DEFAULT_CC) -> CalibrationRecord:
    """Measure again (in the mode of `old`) and keep, roof by roof and point by point of the
    bandwidth curve, the higher of the cached and the new value; save and return the result.

    A peak measured while the machine was busy is too low, never too high: a correct kernel
    then looks faster than the roofline allows. The agent calls this when a result fails the
    plausibility gate, before it rejects the kernel.
    """
    new = _measure_record(old.quick, cc)
    fresh = {p.working_set_bytes: p.bytes_per_s for p in new.spec.bw_curve}
    curve = [
        BandwidthPoint(
            working_set_bytes=p.working_set_bytes,
            bytes_per_s=max(p.bytes_per_s, fresh.get(p.working_set_bytes, 0.0)),
        )
        for p in old.spec.bw_curve
    ] or new.spec.bw_curve
    o, n = old.spec, new.spec
    spec = msgspec.structs.replace(
        o,
        peak_bw_bytes_s=max(o.peak_bw_bytes_s, n.peak_bw_bytes_s),
        peak_matmul_flops=max(o.peak_matmul_flops, n.peak_matmul_flops),
        peak_vector_flops=max(o.peak_vector_flops, n.peak_vector_flops),
        bw_curve=curve,
        source=f"{o.source.split('; raised')[0]}; raised to the best of a re-measure on {time.strftime('%Y-%m-%d')}",
    )
    merged = msgspec.structs.replace(
        old,
        spec=spec,
        triad_bytes_per_s={
            k: max(v, new.triad_bytes_per_s.get(k, 0.0)) for k, v in old.triad_bytes_per_s.items()
        },
        sgemm_flops={k: max(v, new.sgemm_flops.get(k, 0.0)) for k, v in old.sgemm_flops.items()},
        fma_flops=max(old.fma_flops, new.fma_flops),
        loadavg=min(old.loadavg, new.loadavg),
    )
    _save(merged, calibration_path(root, quick=old.quick, machine=old.machine))
    return merged


def _measure_record(quick: bool, cc: str) -> CalibrationRecord:
    """Run the measurement in a fresh subprocess and turn it into a record (not saved)."""
    t0 = time.perf_counter()
    load = os.getloadavg()[0]
    cmd = [sys.executable, "-m", "hardware_agents.cpu.calibrate", "--cc", cc] + (["--quick"] if quick else [])
    env = {**os.environ, "OMP_NUM_THREADS": str(usable_cores()), "OPENBLAS_NUM_THREADS": str(usable_cores())}
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=300)
    if proc.returncode != 0:
        raise CalibrationError(f"calibration failed:\n{proc.stderr[-4000:]}")
    raw = json.loads(proc.stdout.strip().splitlines()[-1])
    m = machine_info(cc)
    curve = [
        BandwidthPoint(working_set_bytes=int(k), bytes_per_s=v)
        for k, v in sorted(raw["triad"].items(), key=lambda kv: int(kv[0]))
    ]
    mode = "quick" if quick else "full"
    spec = DeviceSpec(
        kind="cpu",
        name=f"{m.cpu_model} ({m.cores} cores)",
        peak_bw_bytes_s=curve[-1].bytes_per_s,
        peak_matmul_flops=max(raw["sgemm"].values()),
        peak_vector_flops=raw["fma"],
        measured=True,
        bw_curve=curve,
        source=(
            f"measured by accelopt calibrate ({mode}) on {time.strftime('%Y-%m-%d')}: "
            "STREAM triad (OpenMP, fp32), numpy sgemm, OpenMP FMA loop"
        ),
        extra={"l2_bytes": str(m.l2_bytes), "l3_bytes": str(m.l3_bytes), "compiler": m.compiler},
    )
    return CalibrationRecord(
        spec=spec,
        machine=m,
        quick=quick,
        created=time.strftime("%Y-%m-%dT%H:%M:%S"),
        seconds=time.perf_counter() - t0,
        triad_bytes_per_s=raw["triad"],
        sgemm_flops=raw["sgemm"],
        fma_flops=raw["fma"],
        loadavg=max(load, os.getloadavg()[0]),
    )


def _save(record: CalibrationRecord, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".{os.getpid()}.tmp")
    tmp.write_bytes(msgspec.json.format(msgspec.json.encode(record), indent=2))
    os.replace(tmp, path)


# --- the measurement (runs in the subprocess) -------------------------------------------------


def _best(fn: Callable[[], float], budget_s: float, max_trials: int) -> float:
    """Minimum over short trials until the time budget is spent (at least 3 trials)."""
    best, spent, n = float("inf"), 0.0, 0
    while n < 3 or (spent < budget_s and n < max_trials):
        t = fn()
        best, spent, n = min(best, t), spent + t, n + 1
    return best


def _measure(quick: bool, cc: str) -> dict[str, object]:
    """All-thread and single-thread measurements; the roof is the better of all-threads and
    single-thread x cores (compute scales linearly with cores; on a shared machine a busy
    neighbour core spoils the all-thread runs but not the single-thread ones). Long because
    the measurements share one set of buffers and thread limits, taken in one sequence."""
    import numpy as np

    try:
        from threadpoolctl import threadpool_limits
    except ImportError:  # pragma: no cover - optional: then BLAS is measured all-threads only
        threadpool_limits = None

    with tempfile.TemporaryDirectory(prefix="accelopt-cal-") as tmp:
        src, so = Path(tmp) / "cal.c", Path(tmp) / "cal.so"
        src.write_text(CALIBRATION_C)
        subprocess.run(
            [cc, "-O3", "-march=native", "-fopenmp", "-shared", "-fPIC", str(src), "-o", str(so)],
            check=True,
            capture_output=True,
        )
        lib = ctypes.CDLL(str(so))
    lib.triad.restype = ctypes.c_double
    lib.triad.argtypes = [ctypes.c_void_p] * 3 + [ctypes.c_long, ctypes.c_float, ctypes.c_int]
    lib.fma_loop.restype = ctypes.c_double
    lib.fma_loop.argtypes = [ctypes.c_long, ctypes.c_void_p]
    gomp = ctypes.CDLL("libgomp.so.1")
    cores = usable_cores()
    budget = 0.08 if quick else 0.35

    l3 = machine_info(cc).l3_bytes
    # a VM may report its host's whole L3 (480 MiB seen): beyond a cap the arrays would only
    # cost memory and time, and such a cache is shared with the host's other tenants anyway
    cap = (1 << 30) if quick else (2 << 30)
    footprints = sorted(
        {
            min(f, cap)
            for f in (
                [1 << 20, l3 // 2, 8 * l3]
                if quick
                else [256 << 10, 1 << 20, 4 << 20, l3 // 2, l3, 2 * l3, 4 * l3, 16 * l3]
            )
        }
    )

    def triad_bw(footprint: int) -> tuple[int, float]:
        n = footprint // 12
        arrays = [np.ones(n, dtype=np.float32) for _ in range(3)]
        a, b, c = (x.ctypes.data for x in arrays)
        reps = max(1, int((24 << 20) // footprint))  # each trial moves >= ~24 MiB
        best_bw = 0.0
        for threads in (cores, 1):
            gomp.omp_set_num_threads(threads)
            lib.triad(a, b, c, n, 1.5, 1)
            t = _best(lambda: lib.triad(a, b, c, n, 1.5, reps), budget, 200)
            best_bw = max(best_bw, 12 * n * reps / t)
        return 12 * n, best_bw

    triad = {str(k): v for k, v in map(triad_bw, sorted(set(footprints)))}

    sgemm: dict[str, float] = {}
    for size in [768] if quick else [768, 1024, 2048]:
        x = np.random.default_rng(0).standard_normal((size, size), dtype=np.float32)
        y = np.random.default_rng(1).standard_normal((size, size), dtype=np.float32)

        def mm(x: np.ndarray = x, y: np.ndarray = y) -> float:
            t = time.perf_counter()
            x @ y
            return time.perf_counter() - t

        x @ y
        best = 2 * size**3 / _best(mm, budget, 50)
        if threadpool_limits is not None and cores > 1:
            with threadpool_limits(limits=1, user_api="blas"):
                x @ y
                best = max(best, cores * 2 * size**3 / _best(mm, budget, 50))
        sgemm[str(size)] = best

    sink = np.zeros(256, dtype=np.float32)
    iters = 20_000
    fma = 0.0
    for threads in (cores, 1):
        gomp.omp_set_num_threads(threads)
        lib.fma_loop(1000, sink.ctypes.data)
        t = _best(lambda: lib.fma_loop(iters, sink.ctypes.data), budget, 400)
        fma = max(fma, 2 * FMA_LANES * iters * threads / t * (cores / threads))
    return {"triad": triad, "sgemm": sgemm, "fma": fma}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="measure CPU roofline peaks (prints one JSON line)")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--cc", default=DEFAULT_CC)
    args = ap.parse_args(argv)
    print(json.dumps(_measure(args.quick, args.cc)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
