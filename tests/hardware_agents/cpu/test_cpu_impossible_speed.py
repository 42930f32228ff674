"""Impossible speed. A kernel that remembers results by input content would be correct on
every call and do no work when timed inputs repeat: timed inputs never repeat, so its cache
never hits and it is timed doing the work. Whatever we have not thought of that makes a
result faster than the machine allows is still stopped by the roofline gate, shown here
with a problem that claims 1000x more memory traffic than its kernel needs."""

from __future__ import annotations

import msgspec
from cpu_helpers import c_solution

import suites
from accelopt.problem import Problem, Roofline
from hardware_agents.cpu import CpuAgent

CONTENT_CACHE = r"""
#include <string.h>
#define SLOTS 8
static float saved[SLOTS][M * N];
static float keys[SLOTS][4];
static int used = 0;

void kernel(const float* lhs, const float* rhs, float* out) {
    float key[4] = {lhs[0], lhs[M * K - 1], rhs[0], rhs[K * N - 1]};
    for (int s = 0; s < used; s++)
        if (!memcmp(keys[s], key, sizeof key)) { memcpy(out, saved[s], sizeof saved[s]); return; }
    #pragma omp parallel for
    for (int i = 0; i < M; i++) {
        for (int j = 0; j < N; j++) out[i * N + j] = 0.0f;
        for (int k = 0; k < K; k++)
            for (int j = 0; j < N; j++) out[i * N + j] += lhs[i * K + k] * rhs[k * N + j];
    }
    int slot = used < SLOTS ? used++ : SLOTS - 1;
    memcpy(keys[slot], key, sizeof key);
    memcpy(saved[slot], out, sizeof saved[slot]);
}
"""


def inflated_roofline(problem: Problem, factor: int = 1000) -> Problem:
    """The same problem claiming `factor` x its minimal traffic and work: any honest kernel
    then looks faster than the machine allows."""
    r = problem.definition.x_roofline
    assert r is not None
    big = Roofline(
        flops_matmul=f"({r.flops_matmul})*{factor}",
        flops_vector=f"({r.flops_vector})*{factor}",
        bytes_min=f"({r.bytes_min})*{factor}",
    )
    d = msgspec.structs.replace(problem.definition, x_roofline=big)
    return msgspec.structs.replace(problem, definition=d)


def test_content_keyed_cache_never_hits_and_is_timed_doing_the_work(cpu_agent: CpuAgent) -> None:
    problem = suites.get_problem("cpu/matmul")
    prof = cpu_agent.profile(problem, c_solution(problem, CONTENT_CACHE))
    assert prof.status == "passed", prof.log
    assert prof.peak_fraction is not None and prof.peak_fraction <= cpu_agent.max_pct_peak
    honest = cpu_agent.profile(problem, problem.baseline)
    assert honest.latency is not None and prof.latency is not None
    assert prof.latency.median_ms > 0.2 * honest.latency.median_ms  # a hit would be a memcpy, >100x faster


def test_faster_than_the_machine_allows_is_rejected(cpu_agent: CpuAgent) -> None:
    problem = inflated_roofline(suites.get_problem("cpu/matmul"))
    prof = cpu_agent.profile(problem, problem.baseline)
    assert prof.status == "incorrect", prof.log
    assert "faster than the machine allows" in prof.log
    assert all(c.passed for c in prof.correctness)  # every value it returned was right
    assert prof.peak_fraction is not None and prof.peak_fraction > cpu_agent.max_pct_peak
