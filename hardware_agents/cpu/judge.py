"""The trusted side of one CPU profile: correctness, timing and the verdict.

Drives a `KernelRunner` (the kernel server in its sandbox) and decides everything from
what the parent owns: the references (`ProblemData`, in this process only), the clock
(the parent's, around each batch), and the outputs (read from the parent's own mapping
while the child is stopped, and proved stopped: `hardware_agents/sandbox/freeze.py`).

Correctness: one batch with every case (seeds and adversarial) in its own buffer set,
outputs poisoned with NaN and fenced by canaries, each compared in full with its float64
reference.

Timing: batches of calls, each call on fresh random inputs (`ProblemData.fresh_content`)
or, at random positions, a pool set as it is (each at most once per profile). The batch
size comes from a first measured call: a batch holds enough calls for the handshake that
starts it (measured on a batch without calls) to be at most `HANDSHAKE_SHARE` of its time,
and the memory roof is the bandwidth at the footprint of those calls. After every batch
every call's outputs must be finite, inside their canaries and distinct from the other
calls'; the process must not have used more CPU time than wall time x the cores it was
given, nor have widened its CPU mask; the pool calls are checked in full against their
float64 references, and calls drawn at random after the batch are checked in full
(`oracle.py`: against the problem's baseline run on the same inputs, disagreements settled
by the float64 reference), `FULL_CHECKS` per profile: a kernel lazy on a fraction
f >= 5 % of its timed calls is caught with probability >= 99 %. Without a usable baseline
the drawn calls are checked against float64 references within `CHECK_BUDGET_S`, and the
profile records the fraction that bound then covers (`lazy_fraction_caught_99`). Which calls
get checked is decided only after the batch has run, so even a kernel that reads its own
batch (it shares a process with the server) cannot know. Calls of both phases look alike.
"""

from __future__ import annotations

import math
import os
import secrets
from collections.abc import Callable
from typing import Any

import msgspec
import numpy as np

from accelopt.problem import Problem
from accelopt.profile import LatencyStats, Profile, SeedCheck
from hardware_agents import quiet
from hardware_agents.cpu.data import ProblemData
from hardware_agents.cpu.floors import CaseFloors
from hardware_agents.cpu.oracle import FULL_CHECKS, BaselineOracle, OracleUnavailable, lazy_fraction_caught
from hardware_agents.cpu.runner import KernelDied, KernelRunner
from hardware_agents.pipeline import compare, numpy_ref
from hardware_agents.pipeline.device_spec import DeviceSpec
from hardware_agents.pipeline.phases import Phases
from hardware_agents.pipeline.roofline import achieved, speed_verdict
from hardware_agents.pipeline.stats import latency_stats, spread
from hardware_agents.pipeline.verdict import Verdict, fail_case
from hardware_agents.sandbox import Sandbox, SandboxOutcome

MIN_BATCHES = 3  # timed batches per profile at least; up to 2 more per allowed re-run (CpuAgent.max_reruns)
CHECK_BUDGET_S = (
    1.0  # without a baseline oracle: float64 reference time per profile for full checks (>= 1 per batch)
)
EXTRA_THREADS = 4  # threads allowed beyond OMP_NUM_THREADS (the interpreter's own)
SETTLE_MAX_S = 0.25  # before each timed batch, wait at most this long for the parent's other threads to stop
HANDSHAKE_SHARE = 0.02  # a batch has enough calls for its handshake to be at most this share of its time
MIN_CALLS = 2  # calls per timed batch at least
CPU_SLACK = (
    1.05  # CPU time of a batch may exceed wall x cores given by this factor (+ CPU_SLACK_S): accounting
)
CPU_SLACK_S = 0.002
_SAMPLE = 64  # elements per output compared across the calls of a batch


class TimingRules(msgspec.Struct, frozen=True, kw_only=True):
    """What the agent sets for the timing and the verdict of its profiles."""

    threads: int  # OMP_NUM_THREADS
    cpus: tuple[int, ...]  # the cores given to the kernel (its CPU time per batch <= wall x their number)
    timing_budget_s: float
    max_reruns: int
    spread_threshold: float
    max_pct_peak: float


def death_verdict(v: Verdict, out: SandboxOutcome) -> Profile:
    """The verdict on the kernel server's death during a stage."""
    hint = ""
    if out.signal in ("SIGSEGV", "SIGBUS"):
        hint = " (inputs are mapped read-only: a write to an input faults; so does a write past the mapped buffers)"
    return v.ended(
        out,
        crashed=f"the kernel crashed: {out.error}{hint}",
        error=out.error[-4000:],
        compile_error=out.status == "error" and out.error_type == "EntrySymbolMissing",
    ) or v.profile("runtime_error", f"the kernel server exited unexpectedly ({out.status})")


def cores_used(
    rules: TimingRules, runner: KernelRunner, wall_s: float, what: str, counters: dict[str, float]
) -> str | None:
    """Why the last batch used cores the kernel was not given, or None: its CPU time (all
    threads) beyond wall x cores, or a thread whose CPU mask is wider than the one given
    (`counters` keeps the highest CPU time over wall seen)."""
    given = rules.cpus
    cpu = runner.last_run_cpu_s
    if cpu is not None:
        counters["max_batch_cpu_over_wall"] = max(
            counters.get("max_batch_cpu_over_wall", 0.0), cpu / max(wall_s, 1e-9)
        )
        if cpu > len(given) * wall_s * CPU_SLACK + CPU_SLACK_S:
            return (
                f"{what} used {cpu * 1e3:.3g} ms of CPU time in {wall_s * 1e3:.3g} ms: more than the "
                f"{len(given)} cores it was given (OMP_NUM_THREADS={rules.threads})"
            )
    for tid in runner.thread_ids():
        try:
            mask = os.sched_getaffinity(tid)
        except OSError:
            continue
        if not mask <= set(given):
            return (
                f"a thread of the kernel's process runs on CPUs {sorted(mask)}; it was given "
                f"{sorted(given)} and may not widen that"
            )
    return None


class Judge:
    """One profile's correctness, timing and verdict (`verdict`: the pipeline's, made with the
    agent's `fail`), one method per stage the agent runs: `correctness`, `timing`, `gate`,
    then `close` (always). `remeasured` gives this machine's peaks measured again (or None:
    not now), asked once a result looks faster than the machine allows."""

    def __init__(
        self,
        verdict: Verdict,
        rules: TimingRules,
        problem: Problem,
        data: ProblemData,
        spec: DeviceSpec | None,
        box: Sandbox,
        library: str,
        symbol: str,
        sets: int,
        timeout_s: float,
        oracle: Callable[[], BaselineOracle] | None = None,
        remeasured: Callable[[], DeviceSpec | None] | None = None,
    ) -> None:
        self.v, self.rules, self.problem, self.data, self.spec = verdict, rules, problem, data, spec
        self.box, self.library, self.symbol, self.sets, self.timeout_s = box, library, symbol, sets, timeout_s
        self.tol = compare.tolerance_of(problem.definition)
        self.counters, self.checks = verdict.counters, verdict.checks
        # a correctness case that misses the tolerance gets float32's floor (`floors.py`)
        self.floors = CaseFloors(problem, self.tol, self.counters, oracle)
        self.deferred: list[tuple[str, dict[str, Any], dict[str, np.ndarray]]] = []  # (case, inputs, outputs)
        self._make_oracle = oracle
        self._remeasured = remeasured
        self.oracle: BaselineOracle | None = None
        self.oracle_note = ""
        self.scalars = {n: v for n, v in data.cases[0].inputs.items() if not isinstance(v, np.ndarray)}
        self.runner: KernelRunner | None = None
        self.died: SandboxOutcome | None = None  # the kernel server's end, when it died during a stage
        self.closed: SandboxOutcome | None = None  # how the server ended, once stopped
        self.stats: LatencyStats | None = None  # the timed batches' latency and footprint, for `gate`
        self.footprint = 0

    # --- the stages the agent runs (hardware_agents/pipeline/stages.py) ------------------------

    def correctness(self) -> Profile | None:
        """Start the kernel server and judge one batch with every case (None: all correct)."""
        phases = Phases(self.counters)

        def start_and_check() -> Profile | None:
            with phases("child_start"):
                self.runner = KernelRunner(
                    self.box,
                    self.problem,
                    library=self.library,
                    symbol=self.symbol,
                    sets=self.sets,
                    scalars=self.scalars,
                    timeout_s=self.timeout_s,
                )
                self.runner.ready()
            self.v.isolation.update(self.runner.child.isolation())
            with phases("correctness"):
                return self._correctness(self.runner)

        return self._guarded(start_and_check)

    def timing(self) -> Profile | None:
        """The timed batches (None: every batch checked; the latency is kept for `gate`)."""
        assert self.runner is not None
        runner = self.runner
        with Phases(self.counters)("timing"):
            return self._guarded(lambda: self._timing(runner))

    def gate(self) -> Profile:
        """The roofline and its plausibility gate: `passed` or `incorrect`."""
        assert self.runner is not None and self.stats is not None
        return self._roofline(self.stats, self.footprint, self.runner)

    def close(self, prof: Profile) -> Profile:
        """Stop the kernel server (once): its end may void the verdict (it ran while held
        stopped, after its last stop too: while its outputs were read); a failed kernel's
        stderr goes below its log."""
        out = self.shutdown()
        if out.freeze_breach is not None and prof.status not in ("sandbox_error", "timeout"):
            prof = self.v.ran_while_stopped(out.freeze_breach)
        if "timing" in out.isolation:  # how its intervals ran, all of them (read at the start: none)
            self.v.isolation["timing"] = out.isolation["timing"]
        prof.isolation = self.v.isolation
        # the kernel's own stderr (first lines, scrubbed: sandbox/scrub.py) helps the fixer of a
        # failed kernel; a passed kernel's output goes nowhere (no channel into later prompts)
        if out.log.strip() and not prof.passed:
            prof.log = f"{prof.log}\n--- kernel stderr (first lines) ---\n{out.log}"
        return prof

    def shutdown(self) -> SandboxOutcome:
        """Stop the kernel server and the oracle (once; again: the same outcome): how it ended."""
        if self.closed is not None:
            return self.closed
        out = self.died or SandboxOutcome(status="ok")
        self.floors.close()
        if self.oracle is not None:
            self.counters["oracle_checks"] = float(self.oracle.checked)
            self.counters["oracle_disagreements"] = float(self.oracle.disagreements)
            self.oracle.close()
        if self.runner is not None:
            with Phases(self.counters)("child_exit"):
                out = self.runner.close()
            self.counters["sandbox_wall_s"] = out.wall_s
            self.counters["kernel_calls"] = float(self.runner.calls)
            self.counters.update(self.runner.realtime.counters())
            if out.stray_processes:
                self.counters["stray_processes"] = float(out.stray_processes)
        self.closed = out
        return out

    def _guarded(self, step: Callable[[], Profile | None]) -> Profile | None:
        """`step`, or the verdict on the kernel server's death during it."""
        try:
            return step()
        except KernelDied as e:
            self.died = e.outcome
            self.v.record_outcome(e.outcome, tail=False)  # its stderr goes below every failure
            return death_verdict(self.v, e.outcome)

    # --- correctness ------------------------------------------------------------------------

    def _correctness(self, runner: KernelRunner) -> Profile | None:
        cases = self.data.cases
        order = list(range(len(cases)))
        for i, c in enumerate(cases):
            for name, arr in runner.buffers[i].inputs.items():
                np.copyto(arr, c.inputs[name])  # type: ignore[arg-type]
        runner.prepare(order)
        dt = runner.run(order)
        threads = runner.thread_count()
        self.counters["threads_seen"] = float(threads)
        why = cores_used(self.rules, runner, dt, "the correctness batch", self.counters)
        if why:
            return self.v.profile("incorrect", why)
        for i, c in enumerate(cases):
            buf = runner.buffers[i]
            chk = self.floors.check(c, buf.outputs)
            overflow = buf.overflowed()
            if overflow:
                fail_case(chk, f"wrote outside the bounds of {', '.join(overflow)}")
            self.checks.append(chk)
        allowed = self.rules.threads + EXTRA_THREADS
        if threads > allowed:
            return self.v.profile(
                "runtime_error",
                f"the kernel left {threads} threads in its process; at most {allowed} "
                f"are allowed (OMP_NUM_THREADS={self.rules.threads})",
            )
        return self.v.wrong_cases()

    # --- timing -----------------------------------------------------------------------------

    def _batch_size(
        self, runner: KernelRunner, rng: np.random.Generator, distinct: bool
    ) -> tuple[int, str | None]:
        """Calls per timed batch, from the handshake (a batch without calls, best of 3) and a
        first measured batch of `MIN_CALLS` calls on fresh inputs (checked like any other)."""
        h = min(runner.handshake() for _ in range(3))
        probe = list(range(MIN_CALLS))
        for b in probe:
            self.data.fresh_content(runner.buffers[b].inputs, rng)
        runner.prepare(probe)
        quiet.settle(SETTLE_MAX_S)
        dt = runner.run(probe)
        why = cores_used(self.rules, runner, dt, "the first timed batch", self.counters) or self._check_batch(
            runner, probe, rng, {}, len(probe), distinct, -1
        )
        t_call = max(dt - h, 1e-7) / len(probe)
        n = min(runner.sets, max(MIN_CALLS, math.ceil(h / (HANDSHAKE_SHARE * t_call))))
        self.counters.update(handshake_us=h * 1e6, first_call_ms=t_call * 1e3, calls_per_batch_max=float(n))
        return n, why

    def _timing(self, runner: KernelRunner) -> Profile | None:
        spec = self.spec
        assert spec is not None
        rng = np.random.default_rng(secrets.randbits(64))
        data = self.data
        rules = self.rules
        max_batches = MIN_BATCHES + 2 * rules.max_reruns
        self.counters["parent_blas_threads"] = float(quiet.blas_threads())
        if self._make_oracle is not None and self.oracle is None:  # (started for a floor already)
            try:
                self.oracle = self._make_oracle()
            except OracleUnavailable as e:
                self.oracle_note = str(e)
        distinct = bool(data.float_inputs) and len(data.float_inputs) == sum(
            1 for v in data.cases[0].inputs.values() if isinstance(v, np.ndarray)
        )
        n_max, why = self._batch_size(runner, rng, distinct)
        if why:
            return self.v.profile("incorrect", why)
        timed_calls = MIN_CALLS  # the first measured batch's calls were checked like the others
        runner.populate(range(n_max))  # untimed: the page tables of every set a batch may use
        per_batch = math.ceil(FULL_CHECKS / MIN_BATCHES)
        if self.oracle is None:  # float64 references only, as many as the time budget allows
            per_batch = max(1, int(CHECK_BUDGET_S / max(data.reference_s, 1e-3) / MIN_BATCHES))
        pool_left = [int(i) for i in rng.permutation(len(data.pool))]  # each pool set once per profile
        means_ms: list[float] = []
        timed_s = 0.0
        n_min = max(MIN_CALLS, math.ceil(0.75 * n_max))
        footprint = 0
        # past MIN_BATCHES, batches are added while the spread is too wide and this much time is left
        budget_s = rules.timing_budget_s * (1 + rules.max_reruns)
        # the clock measures the kernel on the whole machine: no thread of ours may still be
        # running when it starts (see hardware_agents/quiet.py)
        settle_s, busy = 0.0, 0
        for j in range(max_batches):
            n = int(rng.integers(n_min, n_max + 1))
            sets = [int(b) for b in rng.permutation(n_max)[:n]]
            take = min(len(pool_left), max(1, math.ceil(len(data.pool) / MIN_BATCHES)))
            pool_at = {int(k): pool_left.pop() for k in rng.permutation(n)[:take]}
            for k, b in enumerate(sets):
                if k in pool_at:
                    data.pool_content(runner.buffers[b].inputs, pool_at[k])
                else:
                    data.fresh_content(runner.buffers[b].inputs, rng)
            runner.prepare(sets)
            waited = quiet.settle(SETTLE_MAX_S)
            settle_s += waited
            busy += waited >= SETTLE_MAX_S
            cut = runner.realtime.demoted + runner.realtime.over_budget
            dt = runner.run(sets)
            if runner.realtime.demoted + runner.realtime.over_budget > cut:  # the real-time budget's
                self.counters["timed_batches_ordinary"] = self.counters.get("timed_batches_ordinary", 0.0) + 1
            timed_s += dt
            timed_calls += n
            means_ms.append(dt / n * 1e3)
            footprint = max(footprint, n * data.set_bytes)
            why = cores_used(
                self.rules, runner, dt, f"timed batch {j + 1}", self.counters
            ) or self._check_batch(runner, sets, rng, pool_at, per_batch, distinct, j)
            if why:
                return self.v.profile("incorrect", why)
            if j + 1 >= MIN_BATCHES and (spread(means_ms) <= rules.spread_threshold or timed_s >= budget_s):
                break
        self.counters["parent_settle_s"], self.counters["parent_busy_batches"] = settle_s, float(busy)
        checked = int(self.counters.get("timed_full_checks", 0.0))
        self.counters["timed_calls"] = float(timed_calls)
        # the bound this profile's checks give: every call checked, or the fraction of lazy
        # calls caught with probability >= 99 %
        self.counters["lazy_fraction_caught_99"] = (
            0.0 if checked >= timed_calls else lazy_fraction_caught(checked)
        )
        self.counters["checks_by_baseline"] = float(self.oracle is not None)
        self.stats = latency_stats(means_ms, reruns=len(means_ms) - MIN_BATCHES)
        self.footprint = footprint
        return None

    def _check_batch(
        self,
        runner: KernelRunner,
        sets: list[int],
        rng: np.random.Generator,
        pool_at: dict[int, int],
        computed: int,
        distinct: bool,
        batch: int,
    ) -> str | None:
        label = "the first timed batch" if batch < 0 else f"timed batch {batch + 1}"
        threads = runner.thread_count()
        allowed = self.rules.threads + EXTRA_THREADS
        if threads > allowed:
            return f"the kernel had {threads} threads in its process after {label}; at most {allowed}"
        samples: dict[str, list[bytes]] = {}
        positions: dict[str, np.ndarray] = {}
        for k, b in enumerate(sets):
            buf = runner.buffers[b]
            overflow = buf.overflowed()
            if overflow:
                return f"timed call {k + 1} of {label} wrote outside the bounds of {', '.join(overflow)}"
            for name, out in buf.outputs.items():
                if out.dtype.kind == "f" and not np.isfinite(out).all():
                    return (
                        f"timed call {k + 1} of {label} left non-finite values in {name} "
                        "(unwritten outputs are NaN): every call must compute its whole output"
                    )
                if distinct and out.size >= _SAMPLE:
                    idx = positions.setdefault(name, rng.choice(out.size, _SAMPLE, replace=False))
                    samples.setdefault(name, []).append(out.reshape(-1)[idx].tobytes())
        for name, rows in samples.items():
            if len(set(rows)) < len(rows):
                return (
                    f"two timed calls of {label} returned the same {name} for different inputs: "
                    "results must be computed from each call's own inputs"
                )
        others = [k for k in range(len(sets)) if k not in pool_at]
        drawn = [int(k) for k in rng.permutation(others)[:computed]] if others else []
        for k, i in pool_at.items():
            why = self._full_check(
                f"timed:{batch + 1}.{k + 1}", runner.buffers[sets[k]].outputs, self.data.pool_ref64[i]
            )
            if why:
                return why
        why = self._check_drawn(runner, sets, drawn, batch)
        if why:
            return why
        self.counters["timed_full_checks"] = (
            self.counters.get("timed_full_checks", 0.0) + len(pool_at) + len(drawn)
        )
        return None

    def _check_drawn(self, runner: KernelRunner, sets: list[int], drawn: list[int], batch: int) -> str | None:
        """Full checks of the drawn calls: through the baseline oracle, or (none) deferred to
        float64 references computed after the device lock is released."""
        calls = [
            (f"timed:{batch + 1}.{k + 1}", runner.buffers[sets[k]].inputs, runner.buffers[sets[k]].outputs)
            for k in drawn
        ]
        if self.oracle is not None:
            try:
                note = self.oracle.check(calls)
            except OracleUnavailable as e:
                self.oracle_note = str(e)
                self.oracle.close()
                self.oracle = None
            else:
                if note is None:
                    return None
                self.checks.append(SeedCheck(case="timed", passed=False, note=note))
                return f"output of a timed call is wrong ({note}): results must not depend on earlier calls"
        for name, inputs, outputs in calls[
            : max(1, int(CHECK_BUDGET_S / max(self.data.reference_s, 1e-3) / MIN_BATCHES))
        ]:
            copies: dict[str, Any] = {
                n: np.array(inputs[n]) if n in inputs else self.scalars[n]
                for n in self.problem.definition.inputs
            }
            self.deferred.append((name, copies, {n: np.array(a) for n, a in outputs.items()}))
        return None

    def _full_check(
        self, name: str, outputs: dict[str, np.ndarray], ref: dict[str, np.ndarray]
    ) -> str | None:
        chk = compare.compare_outputs(name, outputs, ref, self.tol)
        if chk.passed:
            return None
        self.checks.append(chk)
        return f"output of a timed call is wrong ({chk.note}): results must not depend on earlier calls"

    def verify_deferred(self, prof: Profile) -> Profile:
        """The full checks whose references are computed here, run after the kernel's process is
        gone and the device lock released (a float64 reference can take a second): a wrong
        output turns the profile into `incorrect`."""
        pending, self.deferred = self.deferred, []
        if prof.status not in ("passed", "incorrect") or prof.latency is None:
            return prof
        for name, inputs, outputs in pending:
            why = self._full_check(name, outputs, numpy_ref.reference_outputs(self.problem, inputs))
            if why:
                return self.v.profile(
                    "incorrect",
                    why,
                    latency=prof.latency,
                    t_peak_ms=prof.t_peak_ms,
                    peak_fraction=prof.peak_fraction,
                    bound=prof.bound,
                )
        return prof

    def _roofline(self, stats: LatencyStats, footprint: int, runner: KernelRunner) -> Profile:
        """The roofline at the bandwidth of the timed footprint, and the gate on the FMA peak
        (`_fma_roof`), judged again on re-measured peaks before it rejects a kernel."""
        spec = self.spec
        assert spec is not None
        self.counters.update(
            {
                "footprint_bytes": float(footprint),
                "bw_at_footprint_gbs": spec.bandwidth_at(footprint) / 1e9,
                "batches": float(len(stats.samples_ms)),
                "calls_per_batch": float(runner.calls) / max(len(runner.batch_s), 1),
                "threads": float(self.rules.threads),
                "reference_s": self.data.reference_s,
            }
        )
        achieved(self.problem, stats.median_ms / 1e3, self.counters)

        def remeasured() -> DeviceSpec | None:  # the peaks may have been measured on a busy machine
            again = self._remeasured() if self._remeasured is not None else None
            if again is not None:
                self.counters["bw_at_footprint_gbs"] = again.bandwidth_at(footprint) / 1e9
                self.counters["peaks_raised"] = 1.0
            return again

        return speed_verdict(
            self.v,
            self.problem,
            spec,
            stats,
            max_pct_peak=self.rules.max_pct_peak,
            working_set_bytes=footprint,
            gate_spec=_fma_roof,
            remeasured=remeasured,
        )


def _fma_roof(spec: DeviceSpec) -> DeviceSpec:
    """The roofline with the matmul term at the FMA peak, for the plausibility gate only.
    The reported % of peak measures matmuls against this machine's sgemm (numpy's BLAS), which
    a well-tuned kernel can beat; what no kernel can beat is the FMA units."""
    return msgspec.structs.replace(
        spec, peak_matmul_flops=max(spec.peak_matmul_flops, spec.peak_vector_flops)
    )
