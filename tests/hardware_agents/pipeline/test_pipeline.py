"""The judging pipeline every agent shares (hardware_agents/pipeline/), tested once, on a toy
kernel language (toy.py) whose untrusted Python kernels run in the real sandbox: the
statuses of a child's end and of its outputs, the rounds the agent drives, the kernel's
clock bounded by ours (on reported rounds and end to end), the plausibility gate and the
freeze breach. The device tests check only what differs per language."""

from __future__ import annotations

import os
import signal
import time

import msgspec
import pytest
from toy import HONEST, TOY_BOUND, TOY_SPEC, ToyAgent, toy_problem, toy_solution

from accelopt.problem import Problem, Workload
from accelopt.profile import Profile
from hardware_agents.pipeline.cases import fresh_seed, plan_cases
from hardware_agents.pipeline.clock import ClockBound, clock_mismatch
from hardware_agents.pipeline.roofline import implausible, speed_verdict
from hardware_agents.pipeline.stats import latency_stats, range_spread, spread
from hardware_agents.pipeline.verdict import Verdict

SLOW_CLOCK = """import time
import numpy as np
_real = time.perf_counter
time.perf_counter = lambda: _real() / 2  # every interval it measures is half as long

def kernel(x):
    return (2 * x + 1).astype(np.float32)
"""
FAST_CLOCK = SLOW_CLOCK.replace("_real() / 2", "_real() * 3")
LAZY_WHEN_TIMED = """import numpy as np
_calls = [0]

def kernel(x):
    _calls[0] += 1
    if _calls[0] > 4:  # past the correctness cases: the timed calls
        return np.zeros_like(x)
    return (2 * x + 1).astype(np.float32)
"""
# kernel source, status, text in the log (checked without timing: measure=False)
UNTIMED = {
    "syntax_error": ("def kernel(x) return x\n", "compile_error", "does not compile"),
    "no_entry": ("def other(x):\n    return x\n", "compile_error", "defines no function `kernel`"),
    "raises": ("def kernel(x):\n    return 1 / 0\n", "runtime_error", "ZeroDivisionError"),
    "aborts": ("import os\n\ndef kernel(x):\n    os.abort()\n", "runtime_error", "SIGABRT"),
    "wrong": (
        "def kernel(x):\n    return (3 * x + 1).astype(x.dtype)\n",
        "incorrect",
        "seed0: out: relative L2",
    ),
    "unwritten": (
        "import numpy as np\n\ndef kernel(x):\n    return np.full_like(x, np.nan)\n",
        "incorrect",
        "non-finite values",
    ),
    "mutates": (
        "def kernel(x):\n    y = (2 * x + 1).astype(x.dtype)\n    x[0] = 7\n    return y\n",
        "incorrect",
        "modified its input x",
    ),
    "honest": (HONEST, "unmeasured", "timing not requested"),
}


@pytest.fixture(scope="module")
def problem() -> Problem:
    return toy_problem()


@pytest.fixture(scope="module")
def agent() -> ToyAgent:
    return ToyAgent()


def _profile(agent: ToyAgent, problem: Problem, source: str, measure: bool = True) -> Profile:
    return agent.profile(problem, toy_solution(problem.name, source), measure=measure)


def test_an_honest_kernel_passes_on_the_roofline(agent: ToyAgent, problem: Problem) -> None:
    prof = _profile(agent, problem, HONEST)
    assert prof.status == "passed", prof.log
    assert [c.case for c in prof.correctness] == ["seed0", "seed21", "seed42", "large"]
    assert prof.latency is not None and len(prof.latency.samples_ms) == agent.rounds
    assert (
        prof.peak_fraction is not None
        and 0 < prof.peak_fraction <= agent.max_pct_peak
        and prof.bound == "memory"
    )
    c = prof.counters
    assert 0 < c["timing_kernel_clock_s"] <= c["timing_wall_s"] and c["timing_untimed_per_call_s"] > 0
    assert (
        c["achieved_gbs"] > 0
        and prof.isolation["freeze"]
        and prof.isolation["landlock_reads"] == "restricted"
    )


@pytest.mark.parametrize("name", sorted(UNTIMED))
def test_every_end_of_the_child_and_of_its_outputs_gets_its_status(
    agent: ToyAgent, problem: Problem, name: str
) -> None:
    source, status, needle = UNTIMED[name]
    prof = _profile(agent, problem, source, measure=False)
    assert prof.status == status, prof.log
    assert needle in prof.log, prof.log
    assert prof.isolation  # what the sandbox applied, on failures too


def test_a_kernel_that_loops_times_out(problem: Problem) -> None:
    prof = ToyAgent(timeout_s=3.0).profile(
        problem, toy_solution(problem.name, "def kernel(x):\n    while True:\n        pass\n"), measure=False
    )
    assert prof.status == "timeout" and "wall-clock timeout" in prof.log, prof.log


@pytest.mark.skipif(os.geteuid() != 0, reason="the sandbox counts leftover processes by its uid (root only)")
def test_processes_left_behind_are_a_runtime_error(agent: ToyAgent, problem: Problem) -> None:
    source = (
        "import os, time\n\ndef kernel(x):\n    if os.fork() == 0:\n        os.setsid()\n        time.sleep(60)\n"
        "        os._exit(0)\n    return (2 * x + 1).astype(x.dtype)\n"
    )
    prof = _profile(agent, problem, source, measure=False)
    assert prof.status == "runtime_error" and "process(es) running (killed)" in prof.log, prof.log


def test_a_wrong_timed_output_is_incorrect(agent: ToyAgent, problem: Problem) -> None:
    prof = _profile(agent, problem, LAZY_WHEN_TIMED)
    assert prof.status == "incorrect" and "the output of a timed call is wrong" in prof.log, prof.log
    assert prof.correctness[-1].case == "timed:r0"


def test_a_slowed_clock_is_caught_end_to_end(agent: ToyAgent, problem: Problem) -> None:
    prof = _profile(agent, problem, SLOW_CLOCK)
    assert prof.status == "timing_mismatch" and "its clock was slowed or replaced" in prof.log, prof.log
    assert prof.counters["timing_mismatch_confirmed"] == 1.0  # a second profile found it too


def test_a_clock_running_fast_is_caught_end_to_end(agent: ToyAgent, problem: Problem) -> None:
    prof = _profile(agent, problem, FAST_CLOCK)
    assert prof.status == "timing_mismatch" and "exceeds the wall time of timing round 0" in prof.log, (
        prof.log
    )


def test_the_clock_bound_on_reported_rounds() -> None:
    """`clock_mismatch` on figures (no sandbox): 10 calls of 100 ms, 2 ms of calibrated untimed
    work a call. Within the allowance an honest round passes; a clock slowed 2x, a frozen one,
    one running fast, a child that never calibrated, and a child whose calls hid in its
    set-ups do not. Without a lower bound (the Neuron agent's parameters) only a reading
    above our clock is caught."""
    bound = ClockBound(over=0.02, share=0.10)
    u, n = 0.002, 10

    def why(
        reported: float,
        wall: float,
        setups: tuple[float, ...] = (0.01,),
        b: ClockBound = bound,
        calibrated: bool = True,
    ) -> str | None:
        return clock_mismatch(
            b,
            [reported],
            [wall],
            calls=n,
            untimed_per_call=u if calibrated else None,
            setups=setups,
            per_setup_s=0.05,
        )

    assert why(1.0, 1.0 + n * u) is None
    assert why(1.0, 1.0 + n * u * 1.05) is None  # within the margin
    slowed = why(0.5, 1.0 + n * u)
    assert (
        slowed is not None
        and slowed.startswith("timing_mismatch: in timing round 0")
        and "its clock was slowed or replaced" in slowed
        and "calibrated on this host" in slowed
    )
    assert why(0.0, 1.0 + n * u) is not None  # frozen
    fast = why(1.0, 0.5)
    assert fast is not None and fast.startswith("reported kernel time") and "by our clock" in fast
    assert "no calibration round" in (why(1.0, 1.0 + n * u, calibrated=False) or "")
    hidden = why(0.05, 0.06, setups=(2.0,))  # its calls ran in what we took for a set-up
    assert hidden is not None and "in its timing phase" in hidden
    upper_only = ClockBound(over=0.01, lower=False, reading="device time", forged="not these runs")
    assert why(0.5, 1.0 + n * u, b=upper_only, calibrated=False) is None  # no lower bound
    forged = why(1.2, 1.0, b=upper_only, calibrated=False)
    assert (
        forged is not None
        and forged.startswith("reported device time")
        and forged.endswith(": not these runs")
    )
    counters: dict[str, float] = {}
    assert (
        clock_mismatch(bound, [1.0, 1.0], [1.02, 1.03], calls=n, untimed_per_call=u, counters=counters)
        is None
    )
    assert counters["timing_wall_s"] == pytest.approx(2.05) and counters["timing_kernel_clock_s"] == 2.0
    assert TOY_BOUND.lower and TOY_BOUND.allowance(n, u, 1.0) > n * u


def test_the_plausibility_gate(problem: Problem) -> None:
    """A kernel faster than max_pct_peak x the roofline is `incorrect`, with its place on the
    roofline recorded: the honest kernel on a device 10^4 times slower than the toy's."""
    slow = msgspec.structs.replace(
        TOY_SPEC,
        peak_bw_bytes_s=TOY_SPEC.peak_bw_bytes_s / 1e4,
        peak_vector_flops=TOY_SPEC.peak_vector_flops / 1e4,
    )
    prof = ToyAgent(spec=slow).profile(problem, toy_solution(problem.name, HONEST))
    assert prof.status == "incorrect" and "faster than the machine allows" in prof.log, prof.log
    assert prof.peak_fraction is not None and prof.peak_fraction > 1.25 and prof.t_peak_ms is not None


def test_the_gate_judges_again_on_re_measured_peaks(problem: Problem) -> None:
    """`remeasured` (the CPU agent's peaks measured again) is asked only when the gate fires,
    and its peaks decide; `gate_spec` gates on another roofline than the one reported."""
    agent = ToyAgent()
    slow = msgspec.structs.replace(TOY_SPEC, peak_bw_bytes_s=1e6)
    stats = latency_stats([1.0, 1.1, 0.9])
    asked: list[int] = []

    def remeasured() -> object:
        asked.append(1)
        return TOY_SPEC

    prof = speed_verdict(Verdict(agent.fail), problem, slow, stats, max_pct_peak=1.25, remeasured=remeasured)  # type: ignore[arg-type]
    assert (
        prof.status == "passed"
        and asked == [1]
        and prof.peak_fraction is not None
        and prof.peak_fraction < 1.25
    )
    prof = speed_verdict(
        Verdict(agent.fail), problem, TOY_SPEC, stats, max_pct_peak=1.25, remeasured=remeasured
    )  # type: ignore[arg-type]
    assert prof.status == "passed" and asked == [1]  # not asked: nothing to doubt
    prof = speed_verdict(
        Verdict(agent.fail), problem, TOY_SPEC, stats, max_pct_peak=1.25, gate_spec=lambda s: slow
    )
    assert (
        prof.status == "incorrect" and prof.peak_fraction is not None and prof.peak_fraction < 1.25
    )  # reported on TOY_SPEC


def test_a_child_that_runs_while_held_stopped_is_incorrect(problem: Problem) -> None:
    """Someone continues the child while the agent holds it stopped before round 1 (here: the
    test, standing in for a timer, an I/O signal or a helper): the rounds end, and the verdict
    says so whatever the child reported."""

    def meddle(k: int, pid: int) -> None:
        if k == 1:
            os.kill(pid, signal.SIGCONT)
            time.sleep(0.05)

    prof = ToyAgent(meddle=meddle).profile(problem, toy_solution(problem.name, HONEST))
    assert prof.status == "incorrect" and "ran while it was stopped" in prof.log, prof.log
    assert "ran_while_stopped_ns" in prof.counters


def test_the_cases_of_a_plan() -> None:
    p = toy_problem(1 << 10)
    assert [pc.name for pc in plan_cases(p, (0, 21))] == ["seed0", "seed21", "large"]
    small = Workload(uuid="small", axes={"N": 16}, x_label="small")
    plan = plan_cases(p, (0, 21), [p.workload, small])
    assert [pc.name for pc in plan] == ["seed0", "seed21", "large", "small-seed0"]
    assert plan[-1].workload is small and plan[-1].label == "small" and plan[0].label == "w0"


def test_fresh_seeds_are_never_a_seed_already_used(monkeypatch: pytest.MonkeyPatch) -> None:
    from hardware_agents.pipeline import cases

    draws = iter([0, 21, 21, 7])
    monkeypatch.setattr(cases.secrets, "randbits", lambda bits: next(draws))
    assert fresh_seed({0, 21}) == 7


def test_latency_statistics() -> None:
    s = latency_stats([1.0, 1.1, 0.9, 1.0, 5.0], reruns=1)
    assert (s.median_ms, s.min_ms, s.max_ms, s.reruns) == (1.0, 0.9, 5.0, 1)
    assert s.spread == pytest.approx(0.1)  # one preemption (5.0) does not blow up the IQR
    assert spread([2.0]) == 0.0
    assert latency_stats([1.0, 3.0], median_ms=1.5, spread_of=range_spread).median_ms == 1.5
    assert range_spread([1.0, 3.0]) == 2.0 and range_spread([]) == float("inf")


def test_the_gate_rule() -> None:
    assert implausible(1e-3, 0.5e-3, 1.5) is None
    why = implausible(1e-4, 1e-3, 1.5)
    assert why is not None and "faster than the machine allows" in why
    assert implausible(0.0, 1e-3, 1.5) is not None
