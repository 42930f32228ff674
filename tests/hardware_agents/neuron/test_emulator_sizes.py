"""The `emulate` mode at sizes whose outputs do not fit the sandbox's default work dir: the
execute child writes every case's outputs into its work dir (a tmpfs capped at
`workdir_bytes` as root), so the cap is sized from the problem's outputs. Here seven cases (the
device's five seeds, `emulate_seeds=5`, and the two drawn after tracing, fresh and fresh-large)
of 88 MiB of silu output (616 MiB) overflow the default 512 MiB: with a fixed cap the child runs
out of room ("Not enough free space ...", `runtime_error`), as NKIBench's real sizes did."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import msgspec
import pytest
from neuron_kernels import SILU_GOOD
from nkibench_fixture import shaped, write_nkibench

import suites
from accelopt.problem import SourceFile
from hardware_agents.neuron import Trn1Agent
from hardware_agents.pipeline.phases import phases_of
from hardware_agents.sandbox import SandboxPolicy
from suites.nkibench import import_nkibench


@pytest.mark.skipif(os.geteuid() != 0, reason="the work dir is a capped tmpfs only as root")
def test_outputs_over_the_default_work_dir_cap_are_written_and_judged() -> None:
    root = Path(tempfile.mkdtemp(prefix="nkb-big-"))
    write_nkibench(root / "src", [shaped("silu", M=4096, N=5632)])
    report = import_nkibench(root / "src", root / "suite", name="big")
    p = suites.load_suite(report.out)[0]
    sol = msgspec.structs.replace(p.baseline, sources=[SourceFile(path="kernel.py", content=SILU_GOOD)])
    agent = Trn1Agent(timeout_s=600, emulate_seeds=5)
    try:
        prof = agent.profile(p, sol)
        (data,) = agent.data._items.values()
        outputs = len(prof.correctness) * sum(data.output_bytes.values())  # every case's, fresh ones too
        assert outputs > SandboxPolicy().workdir_bytes  # more than the old fixed cap holds
    finally:
        agent.close()
    assert prof.status == "unmeasured", prof.log
    # the five seeds and the two drawn after tracing
    assert len(prof.correctness) == 7 and all(c.passed for c in prof.correctness), prof.correctness
    assert prof.estimate is not None
    phases = phases_of(prof.counters)
    for phase in ("stage", "compile", "validate", "analyse", "fresh", "execute", "judge", "price"):
        assert phases[phase] >= 0.0  # every phase timed on the agent's clock
