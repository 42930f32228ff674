"""Compilation paid once (`hardware_agents/triton/solution_cache.py`): what a child's Triton
cache holds when it ends is kept per solution and staged into that solution's later children,
never into another solution's. Shown with a kernel that leaves a mark with its own token in its
Triton cache at import, and spoils its output if it finds another solution's mark there: the
same solution's later children are staged its files, another solution's none, and no kernel
ever finds a foreign mark. (The interpreter compiles nothing, so the mark stands for a compiled
kernel; on a GPU the same folder holds the cubins. The interpreter's boundary cases run in a
second child of the profile: it is already staged the first child's files.)"""

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
_FOUND = _CACHE.get_file("mark.txt")
_FOREIGN = _FOUND is not None and open(_FOUND).read() != _TOKEN
_CACHE.put(_TOKEN, "mark.txt")


"""


def _marking(p, token: str) -> str:  # type: ignore[no-untyped-def]
    body = "def run(hidden_states: torch.Tensor, weight: torch.Tensor, output: torch.Tensor) -> None:\n"
    spoil = "    if _FOREIGN:\n        output.fill_(0)\n        return\n"
    return f"_TOKEN = {token!r}\n" + edited(p, body, MARK + body + spoil)


def test_a_solution_is_staged_its_own_cache_and_no_other(interp_agent, triton_suite) -> None:
    p = triton_suite["rmsnorm_h4096"]
    a = solution(p, _marking(p, uuid.uuid4().hex))  # a solution no earlier run kept anything of
    first = interp_agent.profile(p, a)
    assert first.status == "unmeasured", first.log
    assert first.counters["solution_cache_files"] == 0
    kept = interp_agent.solution_cache.staged(a)
    assert any(v == a.sources[0].content.split("'")[1].encode() for v in kept.values()), kept.keys()
    again = interp_agent.profile(p, solution(p, a.sources[0].content, name="same-source"))  # names aside
    assert again.status == "unmeasured", again.log
    assert again.counters["solution_cache_files"] >= 1  # staged what its first profile's children left
    other = interp_agent.profile(p, solution(p, _marking(p, uuid.uuid4().hex)))
    assert other.status == "unmeasured", other.log  # it never finds the first solution's mark
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
