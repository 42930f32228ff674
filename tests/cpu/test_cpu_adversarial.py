"""Misbehaving kernels: each must come back with its expected status (real sandboxed runs)."""

from __future__ import annotations

import pytest
from cpu_helpers import c_solution
from cpu_helpers import c_solution_source_scale_shift as src

from accelopt.problem import Problem
from hardware_agents.cpu import CpuAgent

GOOD = "out[i] = 2.0f * x[i] + 1.0f;"

CASES = {
    "segfault": (src(setup="*(volatile int*)0 = 1;"), "runtime_error", "SIGSEGV"),
    "abort": (src(setup="abort();"), "runtime_error", "SIGABRT"),
    "wrong_answer": (src("out[i] = 2.0f * x[i];"), "incorrect", "relative L2 error"),
    "nan_output": (src("if (i < (long)M * N - N) out[i] = 2.0f * x[i] + 1.0f;"), "incorrect", "NaN"),
    "explicit_nan": (src("out[i] = (i == 7) ? NAN : 2.0f * x[i] + 1.0f;"), "incorrect", "non-finite"),
    "mutates_input": (src(GOOD, setup="((float*)x)[0] += 1.0f;"), "incorrect", "modified its input"),
    "writes_past_output": (src(GOOD, setup="out[(long)M * N + 3] = 0.0f;"), "incorrect", "outside the bounds of out"),
    "writes_before_output": (src(GOOD, setup="out[-5] = 0.0f;"), "incorrect", "outside the bounds of out"),
    "caches_previous_output": (
        src(prelude="static float saved[M * N]; static int have = 0;",
            setup="if (have) { memcpy(out, saved, sizeof(saved)); return; }",
            body=GOOD + " saved[i] = out[i]; if (i == 0) have = 1;"),
        "incorrect", "seed21"),
    "caches_by_input_pointer": (
        src(prelude="static const float* seen[64]; static float saved[64][M * N]; static int nseen = 0;",
            setup=("for (int s = 0; s < nseen; s++) if (seen[s] == x) { memcpy(out, saved[s], sizeof(saved[s])); return; }"
                   "int slot = nseen < 64 ? nseen++ : 63; seen[slot] = x;"),
            body=GOOD + " saved[slot][i] = out[i];"),
        "incorrect", ""),
    "lower_precision": (src("_Float16 h = (_Float16)x[i]; out[i] = 2.0f * (float)h + 1.0f;"), "incorrect",
                        "lower-precision"),
    "missing_entry": ("void not_the_kernel(void) {}\n", "compile_error", "kernel"),
    "syntax_error": ("void kernel(const float* x, float* out) { this is not C; }\n", "compile_error", "error"),
    "memory_hog": (src(GOOD, setup="for (;;) { char* p = malloc(256 << 20); if (!p) abort(); memset(p, 1, 256 << 20); }"),
                   "runtime_error", ""),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_misbehaving_kernel_gets_expected_status(name: str, cpu_agent: CpuAgent, scale_shift: Problem) -> None:
    source, status, needle = CASES[name]
    prof = cpu_agent.profile(scale_shift, c_solution(scale_shift, source, name=name), timeout_s=20)
    assert prof.status == status, prof.log
    assert needle in prof.log + " ".join(c.note for c in prof.correctness)
    assert prof.pct_peak is None or status != "passed"


def test_good_kernel_passes_with_the_same_harness(cpu_agent: CpuAgent, scale_shift: Problem) -> None:
    """The control: the adversarial table above is only meaningful if a correct kernel passes."""
    prof = cpu_agent.profile(scale_shift, c_solution(scale_shift, src(GOOD)))
    assert prof.status == "passed", prof.log
    assert [c.case for c in prof.correctness] == ["seed0", "seed21", "seed42", "large"]
    assert all(c.passed for c in prof.correctness)
