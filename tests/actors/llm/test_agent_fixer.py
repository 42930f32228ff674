"""Fixer against a real nats-server: a fix that still does not compile, then a fixed
one (checked with the system C compiler); every attempt becomes its own kernel."""

from __future__ import annotations

import asyncio
import shutil
import subprocess

import pytest
from llm_helpers import BROKEN_C, SCALE_ADD_C, envelope, llm_config, of_type, run_agent, scale_add_problem

from accelopt import catalog as c

RUN = "fix-run"
STILL_BROKEN = BROKEN_C.replace("undefined_symbol +", "undefined_symbol2 +")


def fix_request(kernel_id: str, fix_round: int, source: str, log: str) -> c.FixRequested:
    return c.FixRequested(
        **envelope(RUN, "FixRequested", kernel_id),
        kernel_id=kernel_id,
        parent_id="kcand",  # the broken kernel's lineage, which its fix keeps
        plan_id="plan1",
        problem="scale_add",
        iteration=1,
        fix_round=fix_round,
        error_log=log,
        status="compile_error",
        language="c",
        device="cpu",
        source=source,
        parent_source=SCALE_ADD_C,
    )


def compile_errors(source: str) -> str:
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        pytest.skip("no C compiler")
    proc = subprocess.run(
        [cc, "-std=c11", "-fsyntax-only", "-fopenmp", "-DM=1024", "-DN=256", "-x", "c", "-"],
        input=source,
        capture_output=True,
        text=True,
        check=False,
    )
    return proc.stderr if proc.returncode else ""


def test_fix_that_does_not_compile_then_a_fixed_one(nats_server, scripted):
    error1 = compile_errors(BROKEN_C)
    assert "undefined_symbol" in error1
    model, script = scripted(
        {
            "fixer": [
                f"The symbol was misspelled:\n```c\n{STILL_BROKEN}```",
                f"I removed the stray symbol.\n```c\n{SCALE_ADD_C}```",
            ]
        }
    )
    cfg = llm_config(model)
    first = fix_request("kb", 1, BROKEN_C, error1)
    log = asyncio.run(run_agent(nats_server.url, "fixer", cfg, RUN, scale_add_problem(), [first]))
    [k1] = of_type(log, c.KernelProposed)
    assert k1.fix_of == "kb" and k1.fix_round == 1 and (k1.parent_id, k1.plan_id) == ("kcand", "plan1")
    assert k1.kernel_id == c.derive_event_id(RUN, "Kernel", first.event_id)
    error2 = compile_errors(k1.source)
    assert "undefined_symbol2" in error2
    prompt = script.calls[0].messages[1]["content"]
    assert "# Wrong code" in prompt and "undefined_symbol" in prompt and "# Last working version" in prompt

    second = fix_request(k1.kernel_id, 2, k1.source, error2)
    log = asyncio.run(run_agent(nats_server.url, "fixer", cfg, RUN, scale_add_problem(), [second]))
    k2 = next(k for k in of_type(log, c.KernelProposed) if k.fix_round == 2)
    assert k2.fix_of == k1.kernel_id and compile_errors(k2.source) == ""
    assert (k2.parent_id, k2.plan_id) == ("kcand", "plan1")  # a chain keeps the first kernel's
    assert len(of_type(log, c.LLMCallCompleted)) == 2  # both attempts are on the log


def test_fixer_without_code_fails(nats_server, scripted):
    model, _ = scripted({"fixer": ["The error is on line 12: `undefined_symbol` is not declared."]})
    req = fix_request("kb", 1, BROKEN_C, "error")
    log = asyncio.run(run_agent(nats_server.url, "fixer", llm_config(model), RUN, scale_add_problem(), [req]))
    [failed] = of_type(log, c.ProposalFailed)
    assert failed.stage == "fix" and failed.reason == "no code block in reply"


def test_tuner_fixer_reverts_to_the_parent(nats_server):
    req = fix_request("kb", 1, BROKEN_C, "error: undefined_symbol")
    log = asyncio.run(
        run_agent(nats_server.url, "fixer", llm_config("builtin/tuner"), RUN, scale_add_problem(), [req])
    )
    [kernel] = of_type(log, c.KernelProposed)
    assert kernel.source == SCALE_ADD_C and kernel.fix_of == "kb"
