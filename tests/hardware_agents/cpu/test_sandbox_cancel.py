"""A cancel scope stops its own work's sandboxed children and no one else's: two pieces of
work with a real sandboxed child each, one cancelled (its child killed at once, its grandchild
swept by the work's cleanup), the other's child untouched; a child launched in a cancelled
scope is killed as it starts; a cancelled profile goes no further than its next stage."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import pytest

from hardware_agents.sandbox import CancelScope, Sandbox, SandboxOutcome, SandboxPolicy, WorkCancelled

pytestmark = pytest.mark.timeout(120)
SLEEP = "hardware_agents.sandbox.probe:sleep"


def sandbox_children() -> set[int]:
    """The live sandboxed children of this process."""
    me = str(os.getpid())
    found = set()
    for d in Path("/proc").iterdir():
        try:
            stat = (d / "stat").read_text().rpartition(")")[2].split()
            cmd = (d / "cmdline").read_bytes()
        except OSError:
            continue
        if stat[1] == me and stat[0] != "Z" and b"hardware_agents.sandbox.child" in cmd:
            found.add(int(d.name))
    return found


def test_a_cancel_kills_its_own_work_s_child_and_no_other_s() -> None:
    scopes = [CancelScope(), CancelScope()]
    outs: dict[int, SandboxOutcome] = {}

    def work(i: int) -> None:
        with scopes[i].entered(), Sandbox(SandboxPolicy(wall_timeout_s=60)) as box:
            outs[i] = box.run(SLEEP, b"60")

    threads = [threading.Thread(target=work, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    deadline = time.monotonic() + 30
    while len(sandbox_children()) < 2:
        assert time.monotonic() < deadline, "the two children did not start"
        time.sleep(0.05)
    time.sleep(0.5)  # both past their start
    before = sandbox_children()
    t0 = time.monotonic()
    assert scopes[0].cancel("the requester gave up") == 1
    threads[0].join(10)
    assert not threads[0].is_alive() and time.monotonic() - t0 < 10
    assert outs[0].signal == "SIGKILL" and outs[0].status == "crashed", outs[0]
    # the other work's child runs on
    assert threads[1].is_alive() and len(before & sandbox_children()) == 1
    scopes[1].cancel("done")
    threads[1].join(10)
    assert outs[1].signal == "SIGKILL" and not sandbox_children()


def test_a_child_launched_in_a_cancelled_scope_is_killed_as_it_starts() -> None:
    scope = CancelScope()
    scope.cancel("given up before its compile")
    t0 = time.monotonic()
    with scope.entered(), Sandbox(SandboxPolicy(wall_timeout_s=60)) as box:
        out = box.run(SLEEP, b"60")
    assert out.signal == "SIGKILL" and time.monotonic() - t0 < 10, out
    with Sandbox(SandboxPolicy(wall_timeout_s=60)) as box:  # outside the scope: not killed
        assert box.run(SLEEP, b"0.2").status == "ok"


def test_a_cancelled_profile_goes_no_further_than_its_next_stage() -> None:
    from accelopt.profile import Profile
    from hardware_agents.pipeline.stages import Stages, run_stages

    scope = CancelScope()
    ran: list[str] = []

    class Hooks(Stages):
        def build(self):
            ran.append("build")
            scope.cancel("cancelled during the build")

        def correctness(self):
            ran.append("correctness")

        def verdict(self) -> Profile:
            return Profile(status="runtime_error", device="cpu")

    with scope.entered(), pytest.raises(WorkCancelled, match="during the build"):
        run_stages(Hooks(None, None, None, (0,), 1.0, True))  # type: ignore[arg-type]
    assert ran == ["build"]
