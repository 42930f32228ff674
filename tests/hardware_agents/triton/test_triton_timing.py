"""The timing path. Without a GPU the CUDA timer cannot run here, so:

- `timing.measure` (the loop the GPU harness runs) is unit-tested with an injected timer
  that returns scripted durations: the only stand-in in these tests, because there is no
  CUDA device on this machine;
- the whole timed path of the harness (rotated buffer sets, L2 flush, re-poisoned outputs,
  consistency spot checks, timed outputs sent back, statistics, roofline, plausibility)
  runs for real in the sandbox on CPU tensors with the host wall-clock timer
  (`interpreter_timing=True`);
- and the real CUDA path runs where a GPU exists (`@pytest.mark.gpu`).
"""

from __future__ import annotations

import statistics

import pytest
from triton_helpers import edited, solution

from hardware_agents.triton import H100Agent, device_spec, timing
from hardware_agents.triton.agent import plan_cases, rotation_for


class ScriptedTimer:
    """Injected timer: runs the call and returns the next scripted duration (ms)."""

    name = "scripted"

    def __init__(self, durations: list[float], events: list[str]) -> None:
        self.durations = list(durations)
        self.events = events

    def time(self, fn):  # type: ignore[no-untyped-def]
        self.events.append("start")
        fn()
        self.events.append("end")
        return self.durations.pop(0)


def test_measure_flushes_before_every_call_and_averages_trial_medians():
    events: list[str] = []
    durations = [5.0, 1.0, 3.0, 9.0, 2.0, 4.0]  # trial 1: median 3; trial 2: median 4
    timer = ScriptedTimer(durations, events)
    calls: list[int] = []
    checked: list[int] = []
    runs = timing.measure(
        call=lambda t: (calls.append(t), events.append(f"call{t}")),
        after=lambda t: (checked.append(t), t != 7)[1],  # call 7 returns a stale output
        flush=lambda: events.append("flush"), timer=timer, warmup=1, reps=3, trials=2)
    assert [r.samples_ms for r in runs] == [[5.0, 1.0, 3.0], [9.0, 2.0, 4.0]]
    assert [r.median_ms for r in runs] == [3.0, 4.0]
    assert timing.latency_ms(runs) == statistics.fmean([3.0, 4.0])
    assert calls == checked == list(range(8))  # warm-up calls 0 and 4 are checked too, but untimed
    assert [r.inconsistent for r in runs] == [0, 1]
    # every call is preceded by an L2 flush outside the timed region
    assert events[:5] == ["flush", "call0", "flush", "start", "call1"]
    assert all(events[i - 1] == "flush" for i, e in enumerate(events) if e in ("start",) or
               (e.startswith("call") and events[i - 1] != "start"))


def test_rotation_moves_contents_between_buffers():
    for contents in (1, 2, 3, 4):
        r = rotation_for(contents, set_bytes=1 << 20, l2=50 << 20)
        assert r > contents and (contents == 1 or r % contents != 0)
        assert r >= min(64, 100)  # enough sets to exceed 2x L2, up to 64 (the L2 is flushed anyway)
    assert rotation_for(3, set_bytes=1 << 30, l2=50 << 20) == 4  # large sets: just more than the contents


@pytest.fixture(scope="module")
def timed_agent(triton_cache):  # type: ignore[no-untyped-def]
    agent = H100Agent(mode="interpreter", cache_dir=triton_cache, interpreter_timing=True, warmup=1, reps=4,
                      trials=2, flush_bytes=1 << 20, timeout_s=90.0)
    yield agent
    agent.close()


def test_timed_path_in_the_sandbox(timed_agent, triton_suite):
    p = triton_suite["rmsnorm_h4096"]
    prof = timed_agent.profile(p, p.baseline)
    assert prof.status == "passed", prof.log
    assert prof.latency is not None and len(prof.latency.samples_ms) == 8
    medians = [statistics.median(prof.latency.samples_ms[:4]), statistics.median(prof.latency.samples_ms[4:])]
    assert prof.latency.median_ms == pytest.approx(statistics.fmean(medians))
    assert prof.toolchain["timer"] == "perf_counter" and prof.counters["trials"] == 2
    assert prof.counters["footprint_bytes"] > 0 and prof.bound == "memory"
    assert prof.pct_peak is not None and 0 < prof.pct_peak < 1 and prof.t_peak_ms is not None


def test_output_cache_keyed_on_buffers_is_caught_by_rotation(triton_cache, triton_suite):
    p = triton_suite["rmsnorm_h4096"]
    # computes each buffer once, then replays its output: right in the correctness phase (fresh
    # buffers), stale once contents rotate through the timing buffers
    src = edited(p, "def run(hidden_states: torch.Tensor, weight: torch.Tensor, output: torch.Tensor) -> None:\n",
                 "_SEEN = {}\n\n\ndef run(hidden_states: torch.Tensor, weight: torch.Tensor, output: torch.Tensor)"
                 " -> None:\n"
                 "    key = hidden_states.data_ptr()\n"
                 "    if key in _SEEN:\n"
                 "        output.copy_(_SEEN[key])\n"
                 "        return\n")
    src = src.replace("BLOCK=BLOCK_SIZE, num_warps=NUM_WARPS)",
                      "BLOCK=BLOCK_SIZE, num_warps=NUM_WARPS)\n    _SEEN[key] = output.clone()")
    # more timed calls than buffer sets, so buffers are reused (with other contents)
    agent = H100Agent(mode="interpreter", cache_dir=triton_cache, interpreter_timing=True, warmup=2, reps=40,
                      trials=2, flush_bytes=1 << 16, timeout_s=90.0)
    try:
        prof = agent.profile(p, solution(p, src))
    finally:
        agent.close()
    assert prof.status == "incorrect", prof.log
    # caught by the spot checks, or where the allocator hands a new buffer a freed one's address
    # (a stale output even for a first call) by the full checks: of a round's last output or of a
    # correctness case
    assert any(m in prof.log for m in ("timed calls returned values different", "the output of a timed call is wrong",
                                       "outside allclose")), prof.log


def test_faster_than_the_roofline_is_rejected(triton_cache, triton_suite):
    # a device whose roofline no real run can reach: the plausibility gate must fire
    slow = device_spec("h100").__class__(kind="h100", name="imaginary", peak_bw_bytes_s=1.0,
                                         peak_matmul_flops=1.0, peak_vector_flops=1.0)
    agent = H100Agent(mode="interpreter", cache_dir=triton_cache, interpreter_timing=True, warmup=0, reps=2,
                      trials=1, flush_bytes=1 << 16, spec=slow)
    try:
        p = triton_suite["rmsnorm_h4096"]
        prof = agent.profile(p, p.baseline)
    finally:
        agent.close()
    assert prof.status == "incorrect" and "faster than the machine allows" in prof.log, prof.log


@pytest.mark.gpu
def test_cuda_events_on_a_real_gpu(triton_cache, triton_suite):
    agent = H100Agent(mode="cuda", any_gpu=True, cache_dir=triton_cache, timeout_s=600.0)
    try:
        p = triton_suite["rmsnorm_h4096"]
        prof = agent.profile(p, p.baseline)
    finally:
        agent.close()
    assert prof.status == "passed", prof.log
    assert prof.toolchain["timer"] == "cuda_event" and prof.toolchain["mode"] == "cuda"
    assert prof.latency is not None and len(prof.latency.samples_ms) == 150
    assert prof.pct_peak is not None and 0 < prof.pct_peak <= 1.25
    assert any("small" in c.case for c in prof.correctness)  # the check workloads ran on the GPU too


def test_the_kernels_clock_is_bounded_by_ours(interp_agent, triton_suite):
    """`_clock_mismatch` on reported rounds (no sandbox): an honest round passes, a clock
    running fast or slowed / frozen does not, nor does a wrong number of calls."""
    from hardware_agents.triton.agent import PER_ROUND, RoundClock
    from hardware_agents.triton.data import timing_plan
    from hardware_agents.triton.records import HarnessResult, TimingRun, TimingSpec

    p = triton_suite["rmsnorm_h4096"]
    plan, contents = plan_cases(p, (0,), on_gpu=False)
    data = interp_agent.data.get(p, plan, interp_agent._run_reference, device="interpreter",
                                 timing=(contents[0], 1, PER_ROUND))
    assert [c.name for c in data.rounds[0]] == ["timing-r0-c0", "timing-r0-c1"]
    assert all(c.planned.case.seed not in (0,) for c in data.rounds[0])  # fresh seeds
    assert not str(data.rounds[0][0].inputs_file).startswith(str(data.dir))  # not where the kernel may read
    spec = TimingSpec(like=contents[0], per_round=PER_ROUND, rotation=3, timer="perf_counter", warmup=2, reps=8,
                      trials=1, flush_bytes=1 << 20)
    u = interp_agent._untimed_s(spec, data.by_name[contents[0]].set_bytes)
    assert 0 < u < 1.0

    def verdict(per_call_ms: float, wall_s: float, calls: int = 10, setup_s: float = 0.01) -> str | None:
        run = TimingRun(samples_ms=[per_call_ms] * (calls - 2), median_ms=per_call_ms, warmup_ms=[per_call_ms] * 2)
        clock = RoundClock()
        clock.walls, clock.setups = [wall_s], [setup_s]
        return interp_agent._clock_mismatch(HarnessResult(cases=[], timing=[run]), clock, spec, data, {})

    assert verdict(100.0, 1.0 + 10 * u / 2) is None  # 10 calls of 100 ms, honest untimed work between
    assert verdict(100.0, 0.5).startswith("reported kernel time")  # a clock running fast
    slow = verdict(2.0, 1.0 + 10 * u)  # 1 s of calls reported as 20 ms: a slowed clock
    assert slow is not None and "its clock was slowed or replaced" in slow
    assert verdict(0.0, 1.0 + 10 * u) is not None  # a frozen one
    seven = HarnessResult(cases=[], timing=[TimingRun(samples_ms=[1.0] * 5, median_ms=1.0, warmup_ms=[1.0] * 2)])
    assert interp_agent._call_count_error(seven, spec).startswith("reported 7 timed calls")
    # a child that stopped itself out of turn, so that its calls ran in what we took for a set-up,
    # and reported a clock slowed to fit the short window: the whole timing phase is bounded too
    out_of_turn = verdict(5.0, 0.06, setup_s=2.0)
    assert out_of_turn is not None and "ran" in out_of_turn and "timing phase" in out_of_turn
    assert timing_plan(plan, contents[0], 2, 2)[1][1].name == "timing-r1-c1"
