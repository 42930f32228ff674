"""Children started ahead of need (`hardware_agents/triton/spare.py`): the agent's next child
loads torch and Triton, locks itself down and waits stopped while the agent judges the last
one; a profile then skips the child's start. Everything here is real (the sandbox, the
interpreter); a spare is on by default only on a GPU host, where a child's start is most of a
warm profile (5-6 s on an H200 host), so these tests ask for it."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from testdirs import ADVERSARIAL
from triton_helpers import solution

from hardware_agents.triton import H100Agent

sys.path.insert(0, str(ADVERSARIAL))
from corpus import load

HACKS = {h.name: h for h in load("triton")}


@pytest.fixture(scope="module")
def spare_agent(triton_cache: Path) -> Iterator[H100Agent]:
    agent = H100Agent(
        mode="interpreter",
        cache_dir=triton_cache,
        interpreter_timing=True,
        warmup=1,
        reps=3,
        trials=2,
        timeout_s=120.0,
        spare_children=True,
        # a spare starts before a profile's judge region exists and cannot inherit its fd, so an
        # agent judging in place starts a fresh child instead; spares are on by default only on
        # a GPU, where the agent still judges through files, as here
        device_judge=False,
    )
    yield agent
    agent.close()


def test_a_spare_serves_the_next_profile(spare_agent: H100Agent, triton_suite) -> None:
    p = triton_suite["rmsnorm_h4096"]
    first = spare_agent.profile(
        p, p.baseline
    )  # a fresh child for the reference; the harness may wait for a spare
    assert first.status == "passed", first.log
    assert None in spare_agent.children._spares  # the next child warmed up while this one worked
    box, child = spare_agent.children._spares[None]
    assert child.wait_stopped()  # ready: loaded, locked down, stopped, with no request yet
    second = spare_agent.profile(p, p.baseline)
    assert second.status == "passed", second.log
    # the spare was ready: the child's start is the request's hand-over, not an interpreter's start
    assert second.counters["phase_child_start_s"] < 0.5, second.counters
    assert second.isolation.get("landlock_reads") == "restricted", second.isolation
    assert second.isolation.get("seccomp", "").startswith("sockets"), second.isolation
    assert not box.workdir.exists()  # one request a spare: its sandbox is gone after the profile


@pytest.mark.parametrize(
    "name", ["helper_continues_stopped_child", "mutate_inputs_when_timed", "read_references"]
)
def test_a_hostile_kernel_served_by_a_spare_gets_its_status(spare_agent: H100Agent, name: str) -> None:
    import suites

    hack = HACKS[name]
    p = suites.get_problem(hack.problem)
    prof = spare_agent.profile(p, solution(p, hack.source, name=name))
    text = prof.log + " ".join(c.note for c in prof.correctness)
    assert hack.accepts(prof.status, text, on_gpu=False), f"{name}: {prof.status}\n{text}"


def test_a_spare_that_died_is_replaced_by_a_fresh_child(spare_agent: H100Agent, triton_suite) -> None:
    p = triton_suite["rmsnorm_h4096"]
    spare_agent.children.start_spare(None)
    _, child = spare_agent.children._spares[None]
    child.kill()
    prof = spare_agent.profile(p, p.baseline)
    assert prof.status == "passed", prof.log
