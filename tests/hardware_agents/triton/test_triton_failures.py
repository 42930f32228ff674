"""Failure statuses of the Triton agent, each from a real sandboxed run: compile errors
(syntax, missing entry, a kernel the compiler rejects), runtime errors (exceptions,
crashes), timeouts (the worker is killed), input mutation, the static checks, and the
wrong language."""

from __future__ import annotations

import msgspec
from triton_helpers import baseline_source, edited, solution

from accelopt.problem import SourceFile

RMSNORM = "rmsnorm_h4096"
HARNESS = "hardware_agents.triton.harness:run"


def test_syntax_error_is_a_compile_error(interp_agent, triton_suite):
    p = triton_suite[RMSNORM]
    prof = interp_agent.profile(p, solution(p, baseline_source(p) + "\ndef broken(:\n"))
    assert prof.status == "compile_error" and "SyntaxError" in prof.log, prof.log


def test_missing_entry_point_is_a_compile_error(interp_agent, triton_suite):
    p = triton_suite[RMSNORM]
    prof = interp_agent.profile(p, solution(p, edited(p, "def run(", "def run_renamed(")))
    assert prof.status == "compile_error" and "no callable `run`" in prof.log, prof.log


def test_kernel_the_compiler_rejects_is_a_compile_error(interp_agent, triton_suite):
    p = triton_suite[RMSNORM]
    src = edited(p, "offs = start + tl.arange(0, BLOCK)", "offs = start + tl.arange(0, 100)")
    prof = interp_agent.profile(p, solution(p, src))
    assert prof.status == "compile_error", prof.log
    assert "power of 2" in prof.log and 'File "main.py"' in prof.log  # the author's path, not the sandbox's


def test_exception_is_a_runtime_error(interp_agent, triton_suite):
    p = triton_suite[RMSNORM]
    src = edited(
        p,
        "    batch_size, hidden_size = hidden_states.shape\n",
        "    batch_size, hidden_size = hidden_states.shape\n    raise ValueError('boom at runtime')\n",
    )
    prof = interp_agent.profile(p, solution(p, src))
    assert prof.status == "runtime_error" and "boom at runtime" in prof.log, prof.log


def test_crash_is_a_runtime_error(interp_agent, triton_suite):
    p = triton_suite[RMSNORM]
    src = "import os\n\n\ndef run(hidden_states, weight, output):\n    os.abort()\n"
    prof = interp_agent.profile(p, solution(p, src))
    assert prof.status == "runtime_error" and "crashed" in prof.log and "SIGABRT" in prof.log, prof.log


def test_endless_kernel_times_out_and_is_killed(interp_agent, triton_suite):
    p = triton_suite[RMSNORM]
    src = edited(
        p,
        "    batch_size, hidden_size = hidden_states.shape\n",
        "    batch_size, hidden_size = hidden_states.shape\n    while True:\n        pass\n",
    )
    prof = interp_agent.profile(p, solution(p, src), timeout_s=6.0)
    assert prof.status == "timeout" and "killed" in prof.log, prof.log
    assert "wall-clock timeout after 6.0 s" in prof.log  # the requested timeout is the one applied
    assert 6.0 <= prof.counters["sandbox_wall_s"] < 60  # a generous bound on the kill (about 6 s when idle)


def test_input_mutation_is_incorrect(interp_agent, triton_suite):
    p = triton_suite[RMSNORM]
    src = edited(
        p,
        "    _rmsnorm_kernel[(batch_size,)]",
        "    weight.mul_(1)\n    hidden_states[0, 0] = 0\n    _rmsnorm_kernel[(batch_size,)]",
    )
    prof = interp_agent.profile(p, solution(p, src))
    assert prof.status == "incorrect" and "modified its input(s) hidden_states" in prof.log, prof.log


def test_static_checks_reject_streams_threads_and_patching(interp_agent, triton_suite, monkeypatch):
    p = triton_suite[RMSNORM]
    sandboxed: list[str] = []  # targets of the sandboxed runs the agent starts
    real_run, real_box = interp_agent.children.run, interp_agent.children.box

    def spy(target, *a, **kw):
        sandboxed.append(target)
        return real_run(target, *a, **kw)

    def spy_box(*a, **kw):  # a driven (timed) harness child starts in a fresh box (or a spare's)
        sandboxed.append("box")
        return real_box(*a, **kw)

    monkeypatch.setattr(interp_agent.children, "run", spy)
    monkeypatch.setattr(interp_agent.children, "box", spy_box)
    for bad, reason in [
        ("import threading\n", "thread"),
        ("s = torch.cuda.Stream()\n", "another CUDA stream"),
        ("torch.cuda.synchronize = lambda: None\n", "patching"),
        ("import gc\nobjs = gc.get_objects()\n", "introspects"),
    ]:
        prof = interp_agent.profile(p, solution(p, bad + baseline_source(p)))
        assert prof.status == "incorrect" and reason in prof.log, (bad, prof.log)
        assert sandboxed == [], bad  # rejected before any sandbox starts
    ok = "# torch.cuda.Stream() in a comment and 'import threading' in a string are fine\n" + baseline_source(
        p
    )
    assert interp_agent.profile(p, solution(p, ok)).status == "unmeasured"
    assert HARNESS in sandboxed  # an accepted solution does run in the sandbox (the spy sees it)


def test_other_languages_are_refused(interp_agent, triton_suite):
    p = triton_suite[RMSNORM]
    prof = interp_agent.profile(p, solution(p, "void kernel(void) {}", language="c"))
    assert prof.status == "compile_error" and "'c'" in prof.log
    cand = solution(p, baseline_source(p))
    not_py = msgspec.structs.replace(
        cand,
        sources=[SourceFile(path="main.cu", content="")],
        spec=msgspec.structs.replace(cand.spec, entry_point="main.cu::run"),
    )
    prof = interp_agent.profile(p, not_py)
    assert prof.status == "compile_error" and "not a Python module" in prof.log
