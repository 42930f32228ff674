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

import os
import statistics

import pytest
import torch
from triton_helpers import edited, solution

import suites
from hardware_agents.triton import H100Agent, device_spec, timed_inputs, timing
from hardware_agents.triton.agent import plan_triton_cases
from hardware_agents.triton.request import rotation_for, timing_plan


class ScriptedTimer:
    """Injected timer: runs the call and returns the next scripted duration (ms) at the end."""

    name = "scripted"

    def __init__(self, durations: list[float], events: list[str]) -> None:
        self.durations = list(durations)
        self.events = events

    def start(self, fn):  # type: ignore[no-untyped-def]
        self.events.append("start")
        fn()
        self.events.append("end")
        return len(self.events)

    def collect(self, tokens):  # type: ignore[no-untyped-def]
        self.events.append("collect")  # one synchronisation per round, after every call
        return [self.durations.pop(0) for _ in tokens]


def test_measure_flushes_before_every_call_and_reads_the_timer_once_per_round():
    events: list[str] = []
    timer = ScriptedTimer([5.0, 1.0, 3.0, 9.0], events)
    calls: list[int] = []
    restocked: list[int] = []
    run = timing.measure(
        call=lambda t: (calls.append(t), events.append(f"call{t}")),
        after=lambda t: (restocked.append(t), events.append(f"after{t}")),
        flush=lambda: events.append("flush"),
        timer=timer,
        warmup=1,
        reps=3,
    )
    assert run.warmup_ms == [5.0] and run.samples_ms == [1.0, 3.0, 9.0] and run.median_ms == 3.0
    assert calls == restocked == [0, 1, 2, 3]
    # every call is preceded by an L2 flush outside the timed region; readings are collected last
    assert events[:6] == ["flush", "start", "call0", "end", "after0", "flush"]
    assert events.count("collect") == 1 and events[-1] == "collect"
    assert timing.latency_ms([run, run]) == statistics.fmean([3.0, 3.0])


def test_every_timed_call_gets_its_own_content_derived_exactly():
    """The per-call contents: a mask of powers of two rotated by the call's shift; scaling by a
    power of two is exact, and the derivation is the same op in the kernel's child and in the
    reference child; no two calls share a content or a run of values."""
    gen = torch.Generator().manual_seed(7)
    base = torch.randn(64, 48, generator=gen).to(torch.bfloat16)
    mask = timed_inputs.make_mask(base.numel(), base.dtype, gen)
    assert mask.numel() == 2 * base.numel() and set(mask.float().unique().tolist()) <= {0.5, 1.0, 2.0}
    calls = timed_inputs.draw_calls(8, 2, {"x": base.numel()}, gen)
    xs = [timed_inputs.derive(base, mask, shift) for _, shift in calls]
    for (_, shift), x in zip(calls, xs, strict=True):
        window = mask[shift : shift + base.numel()].reshape(base.shape).float()
        assert torch.equal(x.float(), base.float() * window)  # exact: no rounding happened
        out = torch.empty_like(base)
        timed_inputs.derive_into(out, base, mask, shift)
        assert torch.equal(out, x)
    assert len({x.float().sum().item() for x in xs}) == len(xs)
    runs = {tuple(x.reshape(-1)[i : i + 16].tolist()) for x in xs for i in range(0, x.numel() - 16, 16)}
    assert len(runs) == len(xs) * (base.numel() // 16 - 1)  # no run of 16 values comes back
    ints = torch.arange(10, dtype=torch.int32)
    assert not timed_inputs.maskable(ints.dtype) and torch.equal(timed_inputs.derive(ints, None, 3), ints)
    big = 3 * timed_inputs.MAX_PERIOD
    assert (
        big % timed_inputs.mask_period(big) == 0 and timed_inputs.mask_period(big) <= timed_inputs.MAX_PERIOD
    )
    # the checks' reach: a call wrong at 5% of its elements escapes 128 sampled positions < 0.2%
    assert timed_inputs.escape_probability(128, 0.05) < 0.002


def test_rotation_moves_contents_between_buffers():
    for contents in (1, 2, 3, 4):
        r = rotation_for(contents, set_bytes=1 << 20, l2=50 << 20)
        assert r > contents and (contents == 1 or r % contents != 0)
        assert r >= min(64, 100)  # enough sets to exceed 2x L2, up to 64 (the L2 is flushed anyway)
    assert rotation_for(3, set_bytes=1 << 30, l2=50 << 20) == 4  # large sets: just more than the contents


@pytest.fixture(scope="module")
def timed_agent(triton_cache):  # type: ignore[no-untyped-def]
    agent = H100Agent(
        mode="interpreter",
        cache_dir=triton_cache,
        interpreter_timing=True,
        warmup=1,
        reps=4,
        trials=2,
        flush_bytes=1 << 20,
        timeout_s=90.0,
    )
    yield agent
    agent.close()


@pytest.mark.parametrize("name", sorted(p.name for p in suites.load_suite("triton")))
def test_every_suite_baseline_passes_timed(timed_agent, triton_suite, name):
    """No honest rejection: each triton-suite baseline, timed on the simulated device with every
    round judged as it ends (clock, set-up, evenness of its calls), passes; a round rejected by
    this loaded host is recorded and made up by an extra round, never a second profile."""
    p = triton_suite[name]
    prof = timed_agent.profile(p, p.baseline)
    assert prof.status == "passed", prof.log
    assert prof.counters["trials"] == timed_agent.trials
    assert prof.counters["timing_rounds_rejected"] <= timed_agent.extra_rounds


def test_timed_path_in_the_sandbox(timed_agent, triton_suite):
    p = triton_suite["rmsnorm_h4096"]
    prof = timed_agent.profile(p, p.baseline)
    assert prof.status == "passed", prof.log
    assert prof.latency is not None and len(prof.latency.samples_ms) == 8
    medians = [statistics.median(prof.latency.samples_ms[:4]), statistics.median(prof.latency.samples_ms[4:])]
    assert prof.latency.median_ms == pytest.approx(statistics.fmean(medians))
    assert prof.toolchain["timer"] == "simulated" and prof.counters["trials"] == 2
    phases = {k: v for k, v in prof.counters.items() if k.startswith("phase_")}
    assert set(phases) >= {
        "phase_data_s",
        "phase_child_start_s",
        "phase_calibration_s",
        "phase_load_and_check_s",
        "phase_timing_rounds_s",
        "phase_judge_s",
    }, phases
    assert all(v > 0 for v in phases.values()), phases  # each clocked by the agent
    assert sum(phases.values()) <= prof.wall_s * 1.05  # parts of the profile, no more
    assert not any(k.startswith("harness_") for k in prof.counters)  # the child's own word is not recorded
    assert prof.counters["footprint_bytes"] > 0 and prof.bound == "memory"
    assert prof.peak_fraction is not None and 0 < prof.peak_fraction < 1 and prof.t_peak_ms is not None


def test_a_strict_umask_does_not_hide_the_rounds_from_the_child(timed_agent, triton_suite):
    """As root the child runs as another uid: the rounds' files and folders we hand over must
    be readable by it whatever the agent's umask (under 077 every timed profile once ended
    `runtime_error`, Permission denied on the round file)."""
    p = triton_suite["rmsnorm_h4096"]
    old = os.umask(0o077)
    try:
        prof = timed_agent.profile(p, p.baseline)
    finally:
        os.umask(old)
    assert prof.status == "passed", prof.log


def test_output_cache_keyed_on_buffers_is_caught_by_rotation(triton_cache, triton_suite):
    p = triton_suite["rmsnorm_h4096"]
    # computes each buffer once, then replays its output: right in the correctness phase (fresh
    # buffers), stale once contents rotate through the timing buffers
    src = edited(
        p,
        "def run(hidden_states: torch.Tensor, weight: torch.Tensor, output: torch.Tensor) -> None:\n",
        "_SEEN = {}\n\n\ndef run(hidden_states: torch.Tensor, weight: torch.Tensor, output: torch.Tensor)"
        " -> None:\n"
        "    key = (hidden_states.data_ptr(), tuple(hidden_states.shape))\n"
        "    if key in _SEEN:\n"
        "        output.copy_(_SEEN[key])\n"
        "        return\n",
    )
    src = src.replace(
        "BLOCK=BLOCK_SIZE, num_warps=NUM_WARPS)",
        "BLOCK=BLOCK_SIZE, num_warps=NUM_WARPS)\n    _SEEN[key] = output.clone()",
    )
    # more timed calls than buffer sets (too little room for one set per call), so buffers are
    # reused (with other contents)
    agent = H100Agent(
        mode="interpreter",
        cache_dir=triton_cache,
        interpreter_timing=True,
        warmup=2,
        reps=40,
        trials=2,
        flush_bytes=1 << 16,
        timeout_s=90.0,
        timing_sets_bytes=0,
    )
    try:
        prof = agent.profile(p, solution(p, src))
    finally:
        agent.close()
    if prof.status == "timing_mismatch":  # its replays took nothing: caught by their evenness first
        assert "calls doing other calls' work" in prof.log, prof.log
        return
    assert prof.status == "incorrect", prof.log
    # caught by the spot checks, or where the allocator hands a new buffer a freed one's address
    # (a stale output even for a first call) by the full checks: of a round's last output or of a
    # correctness case
    assert any(
        m in prof.log
        for m in (
            "timed calls returned values different",
            "the output of a timed call is wrong",
            "outside allclose",
        )
    ), prof.log


def test_outputs_too_large_to_keep_and_a_slow_reference_check_fewer_calls(triton_cache, triton_suite):
    """Where every call's outputs cannot be kept (`keep_outputs_bytes`), the positions travel
    in the round file and the last call is checked in full; where the reference is too slow
    for every call (`reference_budget_s`), a secret random part of the calls is checked (at
    least 4 per round), and the profile says how many and what that leaves to chance."""
    agent = H100Agent(
        mode="interpreter",
        cache_dir=triton_cache,
        interpreter_timing=True,
        warmup=2,
        reps=10,
        trials=2,
        flush_bytes=1 << 16,
        keep_outputs_bytes=0,
        reference_budget_s=0.0,
    )
    try:
        p = triton_suite["rmsnorm_h4096"]
        prof = agent.profile(p, p.baseline)
        lazy = agent.profile(
            p,
            solution(
                p,
                edited(p, "def run(", "_N = [0]\n\n\ndef _run(")
                + (
                    "\n\ndef run(*args):\n    _N[0] += 1\n    _run(*args)\n    if _N[0] > 5:\n"
                    "        args[-1].mul_(1.5)  # wrong by half on every timed call\n"
                ),
            ),
        )
    finally:
        agent.close()
    assert prof.status == "passed", prof.log
    assert prof.counters["timing_calls"] == 24 and prof.counters["timing_checked_calls"] == 8
    assert 0.6 < prof.counters["timing_escape_lazy_5pct"] < 0.7  # 0.95 ** 8
    assert lazy.status == "incorrect" and "sampled elements" in lazy.log, lazy.log


def test_faster_than_the_roofline_is_rejected(triton_cache, triton_suite):
    # a device whose roofline no real run can reach: the plausibility gate must fire
    slow = device_spec("h100").__class__(
        kind="h100", name="imaginary", peak_bw_bytes_s=1.0, peak_matmul_flops=1.0, peak_vector_flops=1.0
    )
    agent = H100Agent(
        mode="interpreter",
        cache_dir=triton_cache,
        interpreter_timing=True,
        warmup=0,
        reps=2,
        trials=1,
        flush_bytes=1 << 16,
        spec=slow,
    )
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
    assert prof.peak_fraction is not None and 0 < prof.peak_fraction <= 1.25
    assert any("small" in c.case for c in prof.correctness)  # the check workloads ran on the GPU too


@pytest.mark.gpu
def test_a_patch_of_torch_cuda_after_the_timer_is_made_never_times_a_call(monkeypatch):
    """The harness makes its timer before it imports the solution, from torch's C-level
    functions; what the solution then does to torch.cuda (a fast Event class, a halved
    elapsed_time, another current stream, a no-op synchronize, and the code objects of the
    Python wrappers changed in place) must not reach it: a 64 MiB device copy still takes its
    real time."""
    timer = timing.SyncedEventTimer(timing.CudaClock())
    src = torch.empty(64 << 20, dtype=torch.uint8, device="cuda")
    dst = torch.empty_like(src)

    def time_copies() -> float:
        run = timing.measure(
            call=lambda t: dst.copy_(src),
            after=lambda t: None,
            flush=lambda: None,
            timer=timer,
            warmup=2,
            reps=10,
        )
        return run.median_ms

    honest = time_copies()

    original = torch.cuda.Event
    wrappers = (original.elapsed_time, original.record, torch.cuda.synchronize)

    class FastEvent(original):  # type: ignore[misc, valid-type]
        def elapsed_time(self, end):  # type: ignore[no-untyped-def]
            return 0.001

    monkeypatch.setattr(original, "elapsed_time", lambda self, end: 0.001)
    monkeypatch.setattr(original, "record", lambda self, stream=None: None)
    monkeypatch.setattr(torch.cuda, "Event", FastEvent)
    monkeypatch.setattr(torch.cuda, "current_stream", lambda device=None: torch.cuda.Stream())
    monkeypatch.setattr(torch.cuda, "synchronize", lambda device=None: None)

    # the wrappers' own code, changed in place (what binding the Python functions could not stop)
    class Fakes:  # methods that carry the __class__ cell the wrappers' super() calls need
        def elapsed_time(self, end_event):  # type: ignore[no-untyped-def]
            return 0.001 or super().elapsed_time(end_event)  # noqa: SIM222 (super(): the cell)

        def record(self, stream=None):  # type: ignore[no-untyped-def]
            return None or super().record(stream)

    fakes = (Fakes.elapsed_time, Fakes.record, lambda device=None: None)
    for fn, fake in zip(wrappers, fakes, strict=True):
        monkeypatch.setattr(fn, "__code__", fake.__code__)
    assert wrappers[0](None, None) == 0.001  # the wrapper's own code lies now
    patched = time_copies()
    assert honest > 0.01  # 128 MiB moved: tens of microseconds on any GPU
    assert patched == pytest.approx(honest, rel=0.5)


def test_the_kernels_clock_is_bounded_by_ours(interp_agent, triton_suite):
    """`timing_clock_mismatch` on reported rounds (no sandbox): an honest round passes, a clock
    running fast, slowed 2x or frozen does not, nor does a wrong number of calls; the
    untimed work allowed is the calibration rounds' wall time per call."""
    from hardware_agents.pipeline.rounds import RoundClock
    from hardware_agents.triton.records import HarnessResult, TimingRun, TimingSpec
    from hardware_agents.triton.rounds_judge import call_count_error, timing_clock_mismatch

    p = triton_suite["rmsnorm_h4096"]
    plan, contents = plan_triton_cases(p, (0,), on_gpu=False)
    tplan = timing_plan(interp_agent, p, plan, contents[0])
    data = interp_agent.data.get(p, plan, interp_agent.run_reference, device="interpreter", timing=tplan)
    # the planned rounds and the extra ones a rejected round may need, drawn alike
    assert len(data.rounds) == interp_agent.trials + interp_agent.extra_rounds
    assert all(len(r.calls) == tplan.calls for r in data.rounds)
    assert not data.rounds[0].file.startswith(str(data.dir))  # not where the kernel may read
    spec = TimingSpec(
        like=contents[0],
        per_round=2,
        rotation=3,
        timer="simulated",
        warmup=2,
        reps=8,
        trials=1,
        flush_bytes=1 << 20,
    )
    u = 0.002  # the calibrated untimed work: 2 ms a call (20 ms for a calibration round of 10 calls)

    def verdict(per_call_ms: float, wall_s: float, calls: int = 10, setup_s: float = 0.01) -> str | None:
        run = TimingRun(
            samples_ms=[per_call_ms] * (calls - 2), median_ms=per_call_ms, warmup_ms=[per_call_ms] * 2
        )
        clock = RoundClock()
        clock.walls, clock.setups = [wall_s], [setup_s]
        clock.cal_walls, clock.cal_setups = [10 * u, 10 * u * 1.5], [0.01]
        return timing_clock_mismatch(
            HarnessResult(cases=[], timing=[run]), clock, spec, rounds=[0], mode="interpreter", counters={}
        )

    assert verdict(100.0, 1.0 + 10 * u) is None  # 10 calls of 100 ms, the calibrated untimed work between
    assert verdict(100.0, 1.0 + 10 * u * 1.05) is None  # within the margin
    assert verdict(100.0, 0.5).startswith("reported kernel time")  # a clock running fast
    slow = verdict(50.0, 1.0 + 10 * u)  # 1 s of calls reported as 0.5 s: a clock slowed 2x
    assert (
        slow is not None and "its clock was slowed or replaced" in slow and "calibrated on this host" in slow
    )
    assert verdict(0.0, 1.0 + 10 * u) is not None  # a frozen one
    seven = HarnessResult(
        cases=[], timing=[TimingRun(samples_ms=[1.0] * 5, median_ms=1.0, warmup_ms=[1.0] * 2)]
    )
    assert (call_count_error(seven, spec) or "").startswith("reported 7 timed calls in round 0")
    # a child that stopped itself out of turn, so that its calls ran in what we took for a set-up,
    # and reported a clock slowed to fit the short window: the whole timing phase is bounded too
    out_of_turn = verdict(5.0, 0.06, setup_s=2.0)
    assert out_of_turn is not None and "ran" in out_of_turn and "timing phase" in out_of_turn
    uncalibrated = RoundClock()
    uncalibrated.walls, uncalibrated.setups = [1.0], [0.01]
    run = TimingRun(samples_ms=[100.0] * 8, median_ms=100.0, warmup_ms=[100.0] * 2)
    assert "no calibration" in (
        timing_clock_mismatch(
            HarnessResult(cases=[], timing=[run]),
            uncalibrated,
            spec,
            rounds=[0],
            mode="interpreter",
            counters={},
        )
        or ""
    )


def test_a_round_is_judged_with_its_set_up_and_the_evenness_of_its_calls():
    """`round_rejected`, as the agent judges each round once it is over: a round whose set-up
    ran past the calibrated set-up by what its calls' clock lacks (a round precomputed before
    the clock started) is rejected, as is one whose calls' mean is far above their median (the
    work of other calls done in a few); an honest round, a set-up within its allowance and a
    slow first warm-up are not."""
    from hardware_agents.pipeline.rounds import RoundClock
    from hardware_agents.triton.records import TimingRun, TimingSpec
    from hardware_agents.triton.rounds_judge import SETUP_SLACK_S, round_rejected

    spec = TimingSpec(like="x", per_round=2, rotation=3, timer="simulated", warmup=2, reps=8, trials=1)
    u = 0.002  # 2 ms of untimed work a call, 20 ms a calibration round of 10 calls

    def judged(calls_ms: list[float], wall_s: float, setup_s: float) -> str | None:
        run = TimingRun(samples_ms=calls_ms[2:], median_ms=0.0, warmup_ms=calls_ms[:2])
        clock = RoundClock()
        clock.walls, clock.setups = [wall_s], [setup_s]
        clock.cal_walls, clock.cal_setups = [10 * u], [0.05]
        return round_rejected(0, run, clock, spec, mode="cuda")

    honest = [10.0] * 10  # 10 calls of 10 ms, 2 ms of untimed work each
    assert judged(honest, 0.1 + 10 * u, 0.05) is None
    assert judged(honest, 0.1 + 10 * u, 0.05 * 1.5 + SETUP_SLACK_S * 0.9) is None  # a slow set-up
    # by time alone a set-up slowed by the host is a set-up that computed: not counted (the agent
    # runs an extra round in its place)
    assert judged(honest, 0.1 + 10 * u, 5.0) is not None
    # the whole round (100 ms of calls) computed in the set-up, each call then a copy of 0.1 ms
    pre = judged([0.1] * 10, 0.001 + 10 * u, 0.05 + 0.1)
    assert pre is not None and "work done before the clock started" in pre, pre
    # the same work in the two warm-ups, the timed calls doing nothing: the sum is honest
    lop = judged([50.0, 49.0] + [0.125] * 8, 0.1 + 10 * u, 0.05)
    assert lop is not None and "calls doing other calls' work" in lop, lop
    assert judged([25.0] + [10.0] * 9, 0.115 + 10 * u, 0.05) is None  # a first warm-up 2.5x slow


def test_do_bench_is_no_agent_timer():
    """do_bench picks its own call count and runs untimed warm-ups (so every kernel used to come
    back runtime_error "reported 617 timed calls"): the option is refused with the reason."""
    with pytest.raises(ValueError, match="cannot be bounded by ours"):
        H100Agent(mode="interpreter", timer="do_bench")
    with pytest.raises(ValueError, match="must be 'cuda_event'"):
        H100Agent(mode="interpreter", timer="perf_counter")
