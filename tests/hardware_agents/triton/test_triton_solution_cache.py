"""Compilation paid once (`hardware_agents/triton/solution_cache.py`): what a child's Triton
cache holds when it ends is kept per solution and staged into that solution's next child, never
into another solution's. Shown with a kernel that leaves a mark in its Triton cache at import and
spoils its output when it finds the mark there: its second profile is `incorrect` (it found its
own mark), a different solution's profile is not (it never sees it). The interpreter compiles
nothing, so the mark stands for a compiled kernel; on a GPU the same folder holds the cubins."""

from __future__ import annotations

import os
import uuid
from pathlib import Path

from triton_helpers import edited, solution

from hardware_agents.triton.solution_cache import CACHE_REL, SolutionCache
from hardware_agents.triton.warmup import WARMUP_KEY

MARK = """
from triton.runtime.cache import get_cache_manager as _manager

_CACHE = _manager("ab" * 32)
_SEEN = _CACHE.get_file("mark.txt") is not None
_CACHE.put(b"left by an earlier profile", "mark.txt", binary=True)


def run("""


def test_a_solution_finds_its_own_cache_and_no_other(interp_agent, triton_suite) -> None:
    p = triton_suite["rmsnorm_h4096"]
    body = "def run(hidden_states: torch.Tensor, weight: torch.Tensor, output: torch.Tensor) -> None:\n"
    src = edited(
        p,
        body,
        MARK.removesuffix("def run(") + body + "    if _SEEN:\n        output.fill_(0)\n        return\n",
    )
    first_src = f"# {uuid.uuid4().hex}\n{src}"  # a solution no earlier run kept anything of
    first = interp_agent.profile(p, solution(p, first_src))
    assert first.status == "unmeasured", first.log
    assert first.counters["solution_cache_files"] == 0
    again = interp_agent.profile(p, solution(p, first_src, name="same-source"))  # the name is no part of it
    assert again.status == "incorrect", again.log  # it found its own mark
    assert again.counters["solution_cache_files"] >= 1
    other = interp_agent.profile(p, solution(p, f"# {uuid.uuid4().hex}\n{src}"))
    assert other.status == "unmeasured", other.log  # another solution never sees it
    assert other.counters["solution_cache_files"] == 0


def test_only_regular_files_of_the_child_s_cache_are_kept(tmp_path: Path, triton_suite) -> None:
    p = triton_suite["rmsnorm_h4096"]
    work = tmp_path / "work"
    entry = work / CACHE_REL / ("cd" * 32)
    entry.mkdir(parents=True)
    (entry / "kernel.cubin").write_bytes(b"\x7fELF")
    (entry / "link").symlink_to("/etc/passwd")  # a link the kernel planted: never followed
    (work / CACHE_REL / WARMUP_KEY).mkdir()
    (work / CACHE_REL / WARMUP_KEY / "warmup.txt").write_text("the sandbox's own")
    store = SolutionCache(tmp_path / "store")
    assert store.keep(p.baseline, work) == 1
    staged = store.staged(p.baseline)
    assert staged == {f"{CACHE_REL}/{'cd' * 32}/kernel.cubin": b"\x7fELF"}
    assert store.staged(solution(p, "# other\n")) == {}
    assert not any(n.startswith(".") for n in os.listdir(tmp_path / "store"))  # no half-written folder
