"""hardware_agents/neuron/judge.py `decoded`: the result a child sent back, or the verdict
that it is unreadable (the device harness's two children and the emulator's two say it so)."""

from __future__ import annotations

import msgspec

from accelopt.profile import Profile
from hardware_agents.neuron.judge import decoded
from hardware_agents.neuron.protocol import HarnessResult
from hardware_agents.pipeline.verdict import Verdict
from hardware_agents.sandbox import SandboxOutcome


def test_a_result_that_decodes_is_the_result(trn1) -> None:
    out = SandboxOutcome(status="ok", payload=msgspec.msgpack.encode(HarnessResult(versions={"nki": "x"})))
    res = decoded(Verdict(trn1.fail), out, HarnessResult, "runtime_error", "unreadable harness result")
    assert isinstance(res, HarnessResult) and res.versions == {"nki": "x"}


def test_an_unreadable_result_is_the_verdict_with_the_kernels_output(trn1) -> None:
    v = Verdict(trn1.fail)
    out = SandboxOutcome(status="ok", payload=b"\xc1 not msgpack", log="printed by the kernel")
    v.record_outcome(out)
    res = decoded(v, out, HarnessResult, "compile_error", "unreadable compile result")
    assert isinstance(res, Profile) and res.status == "compile_error" and res.device == "trn1"
    assert res.log.startswith("unreadable compile result: ") and res.log.endswith("printed by the kernel")
