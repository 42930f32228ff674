"""The verdict of one profile, built up as it runs: what every failure carries, the statuses
a sandboxed child's end maps to, the freeze breach, and the cases judged against references.

    v = Verdict(agent.fail)                # the agent's `fail` makes the Profile
    v.record_outcome(out)                   # the child's isolation and output (shown with its failures)
    v.profile("incorrect", why)             # any status; carries v.checks, v.counters, v.isolation, v.tools
    v.ended(out, crashed=..., compile_error=...)   # None when the child ended `ok`
    v.left_processes(out)                   # processes the kernel left behind: runtime_error
    v.checks.append(fail_case(chk, "modified its input(s) x"))
    v.wrong_cases()                         # incorrect, naming every failed case, or None
    v.profile("passed", log, latency=..., **placement.fields())

A profile's checks and counters are one list and one dict, shared by every Profile the
verdict makes: what is recorded after a failure (a sandbox's wall time, the counters of the
rounds that ran) reaches that failure too.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from accelopt.profile import Profile, SeedCheck
from hardware_agents.sandbox import FreezeBreach, SandboxOutcome

Fail = Callable[..., Profile]  # HardwareAgent.fail(status, log, extra_tools=None, **Profile fields)


def kernel_output(out: SandboxOutcome, head: str = "--- kernel output ---") -> str:
    """The child's output (its first lines, scrubbed) as a tail for a log, or "" when it printed nothing."""
    return f"\n{head}\n{out.log}" if out.log.strip() else ""


def fail_case(chk: SeedCheck, note: str) -> SeedCheck:
    """Fail a case for a reason beyond its values (a mutated input, a write out of bounds)."""
    chk.passed = False
    chk.note = f"{chk.note}; {note}" if chk.note else note
    return chk


class Verdict:
    """One profile's verdict in the making (see the module doc). `held` says when the agent
    holds the kernel's process stopped, for the freeze breach's message."""

    def __init__(self, fail: Fail, *, held: str = "between timing rounds") -> None:
        self._fail = fail
        self.held = held
        self.checks: list[SeedCheck] = []
        self.counters: dict[str, float] = {}
        self.tools: dict[str, str] = {}  # versions learnt on the way (from the device's harness)
        self.isolation: dict[str, str] = {}
        self.tail = ""  # the kernel's output, appended to the failures of its child (see `kernel_output`)

    def record_outcome(self, out: SandboxOutcome, *, tail: bool = True) -> None:
        """Take what a child's end tells every profile of this verdict: the isolation it ran
        under (in place, so a profile made during its rounds has it too) and, with `tail`, its
        output for the failures it explains."""
        self.isolation.clear()
        self.isolation.update(out.isolation)
        self.tail = kernel_output(out) if tail else ""

    def profile(self, status: str, log: str, **kw: Any) -> Profile:
        """The profile with `status` (a failure is a profile whose status says so), carrying
        this verdict's checks, counters, isolation and tools."""
        kw.setdefault("correctness", self.checks)
        kw.setdefault("counters", self.counters)
        kw.setdefault("isolation", self.isolation)
        return self._fail(status, log, self.tools, **kw)

    def ran_while_stopped(self, breach: FreezeBreach) -> Profile:
        """The kernel's process ran while the agent held it stopped (`hardware_agents/sandbox/freeze.py`):
        everything it reported is void."""
        self.counters["ran_while_stopped_ns"] = float(max(0, breach.cpu_ns_now - breach.cpu_ns_at_stop))
        return self.profile(
            "incorrect",
            f"{breach.describe()}. While the agent holds it stopped ({self.held}, while "
            "it stages inputs or reads outputs) the kernel's process must run no code: no timers, "
            f"signals or helper processes that wake it{self.tail}",
        )

    def ended(
        self,
        out: SandboxOutcome,
        *,
        timeout: str = "",
        crashed: str = "",
        error: str = "",
        compile_error: bool = False,
    ) -> Profile | None:
        """The verdict on how a child ended, or None when it ended `ok` (and was not caught
        running while stopped): the freeze breach first (it voids everything the child
        reported), `sandbox_error` when it could not be isolated, `timeout` at its wall or CPU
        limit, else `runtime_error` (a crash, an exception, any other end), or `compile_error`
        where the language says this end is one. The texts default to the outcome's error;
        the kernel's output (`tail`) follows them."""
        if out.freeze_breach is not None:
            return self.ran_while_stopped(out.freeze_breach)
        if out.status == "ok":
            return None
        if out.status == "unisolated":
            return self.profile("sandbox_error", out.error)
        if out.status in ("timeout", "cpu_limit"):
            return self.profile("timeout", f"{timeout or out.error}{self.tail}")
        text = crashed if out.status == "crashed" else error
        return self.profile(
            "compile_error" if compile_error else "runtime_error", f"{text or out.error}{self.tail}"
        )

    def left_processes(self, out: SandboxOutcome) -> Profile | None:
        """runtime_error when the kernel left processes running after its child ended."""
        if not out.stray_processes:
            return None
        return self.profile(
            "runtime_error", f"the kernel left {out.stray_processes} process(es) running (killed){self.tail}"
        )

    def wrong_cases(self, note: str = "") -> Profile | None:
        """`incorrect`, naming every failed case with its note (then `note`), or None when all passed."""
        failed = [c for c in self.checks if not c.passed]
        if not failed:
            return None
        return self.profile("incorrect", "\n".join(f"{c.case}: {c.note}" for c in failed) + note + self.tail)


__all__ = ["Fail", "Verdict", "fail_case", "kernel_output"]
