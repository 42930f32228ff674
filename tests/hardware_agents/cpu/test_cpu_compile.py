"""Compilation: errors come back as compile_error with the compiler's log; builds are cached."""

from __future__ import annotations

from pathlib import Path

from cpu_helpers import c_solution
from cpu_helpers import c_solution_source_scale_shift as src

from accelopt.problem import Problem
from hardware_agents.cpu import CpuAgent
from hardware_agents.cpu.compiler import Compiler


def test_compile_error_carries_the_compiler_log(cpu_agent: CpuAgent, scale_shift: Problem) -> None:
    bad = "void kernel(const float* x, float* out) {\n    out[0] = undeclared_name;\n}\n"
    prof = cpu_agent.profile(scale_shift, c_solution(scale_shift, bad))
    assert prof.status == "compile_error"
    assert "undeclared_name" in prof.log and "kernel.c:2" in prof.log
    assert "/dev/shm" not in prof.log and "accelopt-cc" not in prof.log  # paths are made relative


def test_builds_are_cached_by_content(cpu_cache: Path, scale_shift: Problem) -> None:
    comp = Compiler(cpu_cache)
    sol = c_solution(scale_shift, src(body="out[i] = 2.0f * x[i] + 1.0f; /* cache test */"))
    first = comp.build(sol, scale_shift.axis_values())
    assert first.ok and not first.cached and first.so_path is not None
    built_at = Path(first.so_path).stat().st_mtime_ns
    second = comp.build(sol, scale_shift.axis_values())
    assert second.ok and second.cached and second.key == first.key and second.so_path == first.so_path
    assert Path(second.so_path).stat().st_mtime_ns == built_at  # served from the cache, not rebuilt
    other = comp.build(sol, {**scale_shift.axis_values(), "N": 256})
    assert other.key != first.key  # the axis values are part of the key
    failed = comp.build(c_solution(scale_shift, "int broken("), {})
    again = comp.build(c_solution(scale_shift, "int broken("), {})
    assert not failed.ok and again.cached and again.log == failed.log


def test_compiler_cannot_include_private_files(
    cpu_agent: CpuAgent, scale_shift: Problem, tmp_path: Path
) -> None:
    """The compiler runs sandboxed: `#include` of a file outside the allowed trees fails,
    so its contents cannot reach the compile log (which goes back to an LLM)."""
    secret = tmp_path / "secret.h"
    secret.write_text("int very_secret_token_123 = 1;\n#error leaked\n")
    secret.chmod(0o644)
    prof = cpu_agent.profile(scale_shift, c_solution(scale_shift, f'#include "{secret}"\n' + src()))
    assert prof.status == "compile_error"
    assert "very_secret_token_123" not in prof.log


def test_non_c_solution_is_refused(cpu_agent: CpuAgent, scale_shift: Problem) -> None:
    import msgspec

    sol = c_solution(scale_shift, src())
    py = msgspec.structs.replace(sol, spec=msgspec.structs.replace(sol.spec, language="python"))
    prof = cpu_agent.profile(scale_shift, py)
    assert prof.status == "compile_error" and "compiles C" in prof.log


def test_a_huge_source_is_refused_before_anything_reads_it(cpu_agent: CpuAgent, scale_shift: Problem) -> None:
    """Before the cap a 200 MB source was hashed, staged and compiled (the agent's RSS grew by
    360 MB); now anything over 1 MiB is a compile error at once."""
    from hardware_agents.base import MAX_SOURCE_BYTES

    huge = src() + "/*" + "x" * MAX_SOURCE_BYTES + "*/\n"
    prof = cpu_agent.profile(scale_shift, c_solution(scale_shift, huge))
    assert prof.status == "compile_error" and "the limit is 1 MiB" in prof.log
    assert prof.wall_s < 1.0
    fits = src() + "/*" + "x" * (MAX_SOURCE_BYTES // 2) + "*/\n"
    assert cpu_agent.profile(scale_shift, c_solution(scale_shift, fits), measure=False).status == "unmeasured"


def test_the_build_cache_evicts_its_least_recently_used_entries(tmp_path: Path, scale_shift: Problem) -> None:
    import os

    comp = Compiler(tmp_path)
    builds = [
        comp.build(
            c_solution(scale_shift, src(body=f"out[i] = 2.0f * x[i] + {k}.0f;")), scale_shift.axis_values()
        )
        for k in range(4)
    ]
    assert all(b.ok for b in builds)
    old = builds[0].so_path
    assert old is not None
    for i, b in enumerate(builds):  # as if built long ago, oldest first; then the first one used again
        os.utime(comp.dir / f"{b.key}.json", (1000.0 + i, 1000.0 + i))
    assert comp.build(
        c_solution(scale_shift, src(body="out[i] = 2.0f * x[i] + 0.0f;")), scale_shift.axis_values()
    ).cached
    size = Path(old).stat().st_size
    removed = comp.evict(max_bytes=int(2.5 * size), max_entries=100)
    kept = {p.stem for p in comp.dir.glob("*.json")}
    assert removed == 2 and kept == {builds[0].key, builds[3].key}  # the least recently used went
    assert not (comp.dir / f"{builds[1].key}.so").exists() and Path(old).exists()
    assert comp.evict(max_bytes=1 << 30, max_entries=1) == 1  # the count bounds verdicts too
