"""The Triton sandbox as root: what the libraries create before the privilege drop (Triton's
cache under HOME = the work dir, CUDA's ~/.nv on a GPU) must stay writable by the sandbox
uid. On a GPU host run as root every kernel compile failed with "Permission denied" in
Triton's cache; the same warm-up runs here (no GPU needed), followed by a cache write as
the dropped uid."""

from __future__ import annotations

import errno
import os

import pytest

from hardware_agents.sandbox import Sandbox, SandboxPolicy
from hardware_agents.triton.warmup import CacheProbe


@pytest.mark.skipif(os.getuid() != 0, reason="the privilege drop happens only when the agent runs as root")
def test_triton_cache_created_before_the_drop_is_writable_after_it() -> None:
    policy = SandboxPolicy(
        wall_timeout_s=120,
        preload=("torch", "triton", "hardware_agents.triton.warmup"),
        address_space_bytes=16 << 30,
    )
    with Sandbox(policy) as box:
        out = box.run("hardware_agents.triton.warmup:cache_write_probe")
        assert out.status == "ok", f"{out.status}: {out.error}\n{out.log}"
        probe = out.decode(CacheProbe)
        assert probe.uid != 0 and probe.uid == box.uid
        warm = box.workdir / ".triton" / "cache"
        entries = {p.name for p in warm.rglob("*.txt")}
        assert {"warmup.txt", "probe.txt", "later.txt"} <= entries, entries
        # the warm-up entry was created by root before the drop, then handed to the sandbox uid
        assert next(warm.rglob("warmup.txt")).stat().st_uid == box.uid


@pytest.mark.skipif(
    os.getuid() != 0, reason="the work dir is a tmpfs of its own only when the agent runs as root"
)
def test_production_shape_references_fit_the_reference_sandbox(tmp_path) -> None:
    """On a GPU the plan holds the production workload: fp32 references of every case and
    timed round, 700 MiB for rmsnorm_h4096. The work dir's tmpfs once kept the 512 MiB
    default and the reference child died with 'No space left on device' (every suite problem
    but two). The reference runs on the CPU here; only the plan is the GPU's."""
    import suites
    from hardware_agents.base import DEFAULT_SEEDS
    from hardware_agents.triton.agent import H100Agent, plan_triton_cases
    from hardware_agents.triton.request import timing_plan

    problem = suites.get_problem("triton/rmsnorm_h4096")
    agent = H100Agent(mode="interpreter", cache_dir=tmp_path / "cache", reference_budget_s=2.0)
    try:
        plan, contents = plan_triton_cases(problem, DEFAULT_SEEDS, on_gpu=True)
        timing = timing_plan(agent, problem, plan, contents[0])
        data = agent.data.get(problem, plan, agent.run_reference, device="interpreter", timing=timing)
        ref_bytes = sum(r.nbytes for c in data.by_name.values() for r in c.ref64.values())
        assert ref_bytes > 512 << 20, ref_bytes  # more than the old cap: the case this test is about
        assert {c.name for c in plan} <= set(data.by_name)
    finally:
        agent.close()


@pytest.mark.skipif(
    os.getuid() != 0, reason="the sandbox runs as another uid only when the agent runs as root"
)
def test_the_timing_rounds_cannot_be_listed_by_the_sandbox_uid(tmp_path) -> None:
    """The rounds still to come sit in a folder only the reference child reads, by name. Even
    without Landlock, the sandbox's uid cannot list that folder, and the files have
    unguessable names; a child not given the folder cannot reach it at all (the agent's
    private root, `sandbox.resources.process_root`)."""
    import msgspec
    from testdirs import CPU

    import suites
    from hardware_agents.base import DEFAULT_SEEDS
    from hardware_agents.sandbox import allow_unisolated
    from hardware_agents.triton.agent import H100Agent, plan_triton_cases
    from hardware_agents.triton.request import timing_plan

    problem = suites.get_problem("triton/rmsnorm_h4096")
    agent = H100Agent(mode="interpreter", cache_dir=tmp_path / "cache", interpreter_timing=True)
    try:
        plan, contents = plan_triton_cases(problem, DEFAULT_SEEDS, on_gpu=False)
        timing = timing_plan(agent, problem, plan, contents[0])
        data = agent.data.get(problem, plan, agent.run_reference, device="interpreter", timing=timing)
        folder, name = os.path.split(data.rounds[0].file)
        assert name.startswith("round-0-") and len(name) > len("round-0-.pt") + 8
        got = {}
        for given in ((folder,), ()):  # the reference child is given the folder; a kernel's is not
            policy = SandboxPolicy(
                wall_timeout_s=30, python_path=(str(CPU),), read_paths=given, landlock=False
            )
            with allow_unisolated(True), Sandbox(policy) as box:
                out = box.run("sandbox_targets:list_then_open", f"{folder}\0{name}".encode())
            assert out.status == "ok", f"{out.error}\n{out.log}"
            got[given] = msgspec.msgpack.decode(out.payload)
        assert got[(folder,)] == [errno.EACCES, 0]  # by name only: the reference child's way
        # a child not given it does not even see it: it lies in the agent process's 0700 root
        assert got[()] == [errno.ENOENT, errno.ENOENT]
    finally:
        agent.close()
