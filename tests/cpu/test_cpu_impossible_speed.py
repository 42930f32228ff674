"""A kernel that remembers results by input content is correct on every call but does no work
when timed: the roofline gate rejects the measurement as impossible."""

from __future__ import annotations

from cpu_helpers import c_solution

import suites
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


def test_content_keyed_cache_is_rejected_by_the_roofline(cpu_agent: CpuAgent) -> None:
    problem = suites.get_problem("cpu/matmul")
    prof = cpu_agent.profile(problem, c_solution(problem, CONTENT_CACHE))
    assert prof.status == "incorrect", prof.log
    assert "faster than the machine allows" in prof.log
    assert all(c.passed for c in prof.correctness)  # every value it returned was right
    assert prof.pct_peak is not None and prof.pct_peak > cpu_agent.max_pct_peak
