"""`accelopt mcp` over stdio with the real `mcp` client: every tool's schema and structured
result, the judge's verdicts on honest and hostile kernels (the same as `accelopt profile`'s),
bad input as one-line tool errors with the server still up, progress during a profile, and a
cancelled profile whose process is gone and whose device slot is free again."""

from __future__ import annotations

import asyncio
import json
import subprocess
import time
from pathlib import Path

import anyio
import msgspec
import pytest
from mcp_session import ACCELOPT, REPO, alive, descendants, stdio_session, text_of, worker_pids

from accelopt.kernel_id import kernel_id
from accelopt.profile import Profile

pytestmark = pytest.mark.timeout(300)

SILU = (REPO / "suites" / "cpu_v2" / "silu" / "baseline.c").read_text()
SEGFAULT = "void kernel(const float* x, float* out) { *(volatile int*)0 = 1; }\n"
HANGS = 'void kernel(const float* x, float* out) { for (;;) { __asm__ volatile(""); } }\n'
# honest for the correctness calls, then computes nothing: the timed calls' outputs are checked
LAZY_WHEN_TIMED = """#include <math.h>
static int calls = 0;
void kernel(const float* x, float* out) {
    if (++calls > 6) return;
    for (long i = 0; i < (long)M * N; i++) out[i] = x[i] / (1.0f + expf(-x[i]));
}
"""


def one_line_error(result) -> str:
    assert result.is_error, text_of(result)
    text = text_of(result)
    assert "\n" not in text and "Traceback" not in text and text, text
    return text


def test_tools_schemas_and_problem_facts(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with stdio_session(tmp_path / "runs") as c:
            tools = {t.name: t for t in (await c.list_tools()).tools}
            assert {"list_problems", "get_problem", "profile_kernel", "search_memory"} <= set(tools)
            for t in tools.values():
                assert t.input_schema["type"] == "object" and t.output_schema["type"] == "object", t.name
                assert t.description
            assert tools["profile_kernel"].input_schema["required"] == ["problem", "source"]

            r = await c.call_tool("list_problems", {"suite": "cpu_v2"})
            rows = r.structured_content["problems"]
            assert not r.is_error and len(rows) == 14 and {x["device"] for x in rows} == {"cpu"}
            assert "cpu_v2/silu" in text_of(r)
            r = await c.call_tool("list_problems", {"family": "triton"})
            assert {x["suite"] for x in r.structured_content["problems"]} == {"triton"}
            r = await c.call_tool("list_problems", {"device": "cpu", "op_type": "activation"})
            assert {x["ref"] for x in r.structured_content["problems"]} >= {"cpu/silu", "cpu_v2/silu"}

            r = await c.call_tool("get_problem", {"problem": "cpu_v2/silu"})
            d = r.structured_content
            assert not r.is_error
            assert d["axes"] == {"M": 512, "N": 4096} and d["language"] == "c" and d["device"] == "cpu"
            assert d["inputs"] == [{"name": "x", "shape": [512, 4096], "dtype": "float32"}]
            assert d["tolerance"]["rel_l2"] > 0 and "relative L2" in d["correctness_bar"]
            assert d["baseline_source"] == SILU and d["baseline_kernel_id"] == kernel_id("silu", "c", SILU)
            assert d["interface"] and "Kernel interface" in d["problem_section"] and len(d["primer"]) > 200
            roof = d["roofline"]
            assert (
                roof["bound"] == "memory"
                and roof["t_peak_ms"] > 0
                and roof["bytes_min"] == 4 * 2 * 512 * 4096
            )

    anyio.run(scenario)


def test_bad_input_is_one_line_and_the_server_stays_up(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with stdio_session(tmp_path / "runs") as c:
            bad = [
                ("profile_kernel", {"problem": "cpu_v2/silu"}),  # missing source
                ("profile_kernel", {"problem": 7, "source": SILU}),  # wrong type
                ("profile_kernel", {"problem": "cpu_v2/silu", "source": SILU, "sneaky": 1}),  # unknown key
                ("profile_kernel", {"problem": "cpu_v2/silu", "source": "x" * ((1 << 20) + 1)}),  # oversized
                ("profile_kernel", {"problem": "cpu_v2/silu", "source": SILU, "timeout_s": -1}),
                ("profile_kernel", {"problem": "cpu_v2/nope", "source": SILU}),  # unknown problem
                ("profile_kernel", {"problem": "nosuite/silu", "source": SILU}),
                ("profile_kernel", {"problem": "../../etc/passwd", "source": SILU}),
                ("profile_kernel", {"problem": "cpu_v2/silu", "source": SILU, "device": "tpu9"}),
                (
                    "profile_kernel",
                    {"problem": "cpu_v2/silu", "source": SILU, "device": "h100"},
                ),  # C on a GPU
                ("get_problem", {"problem": "cpu_v2/silu", "device": "nowhere"}),
                ("list_problems", {"suite": "nosuch"}),
                ("search_memory", {}),  # neither query nor kernel
                ("no_such_tool", {}),
            ]
            lines = [one_line_error(await c.call_tool(name, args)) for name, args in bad]
            assert "source" in lines[0] and "problem" in lines[1] and "sneaky" in lines[2]
            assert "length" in lines[3] and "timeout_s" in lines[4]
            assert "no problem 'nope'" in lines[5] and "tpu9" in lines[8] and "cannot run" in lines[9]
            assert "nowhere" in lines[10] and "nosuch" in lines[11] and "no_such_tool" in lines[13]
            r = await c.call_tool("list_problems", {"suite": "cpu_v2"})  # still serving
            assert not r.is_error and len(r.structured_content["problems"]) == 14

    anyio.run(scenario)


def test_verdicts_match_accelopt_profile_and_hostile_kernels_do_not_hurt(tmp_path: Path) -> None:
    """Honest, crashing, hanging and lazy kernels get the statuses `accelopt profile` gives the
    same files, through the same sandboxed path; the server answers after each."""
    lazy = tmp_path / "lazy.c"
    lazy.write_text(LAZY_WHEN_TIMED)
    cli = subprocess.run(
        [ACCELOPT, "profile", "cpu_v2/silu", "--solution", str(lazy), "--json"],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=240,
    )
    cli_status = json.loads(cli.stdout)["status"]
    assert cli_status == "incorrect", cli.stdout[-2000:]

    async def scenario() -> None:
        async with stdio_session(tmp_path / "runs") as c:
            progress: list[tuple[float, float | None, str | None]] = []

            async def on_progress(done: float, total: float | None, message: str | None) -> None:
                progress.append((done, total, message))

            r = await c.call_tool(
                "profile_kernel", {"problem": "cpu_v2/silu", "source": SILU}, progress_callback=on_progress
            )
            j = r.structured_content
            assert not r.is_error and j["status"] == "passed", text_of(r)
            assert j["kernel_id"] == kernel_id("silu", "c", SILU) and j["latency_ms"] > 0
            assert 0 < j["pct_peak"] <= 100 and len(j["seeds"]) == 3
            prof = msgspec.convert(j["profile"], Profile)  # the record a run's log holds
            assert prof.status == "passed" and prof.device == "cpu" and prof.counters and prof.isolation
            assert "passed" in text_of(r) and progress and "cpu_v2/silu" in (progress[0][2] or "")

            r = await c.call_tool("profile_kernel", {"problem": "cpu_v2/silu", "source": LAZY_WHEN_TIMED})
            assert not r.is_error and r.structured_content["status"] == cli_status, text_of(r)

            r = await c.call_tool("profile_kernel", {"problem": "cpu_v2/silu", "source": SEGFAULT})
            assert not r.is_error and r.structured_content["status"] == "runtime_error"
            assert "SIGSEGV" in r.structured_content["profile"]["log"]

            t0 = time.monotonic()
            r = await c.call_tool(
                "profile_kernel", {"problem": "cpu_v2/silu", "source": HANGS, "timeout_s": 3}
            )
            assert not r.is_error and r.structured_content["status"] == "timeout", text_of(r)
            assert time.monotonic() - t0 < 60

            r = await c.call_tool("profile_kernel", {"problem": "cpu_v2/silu", "source": "int kernel( {"})
            assert r.structured_content["status"] == "compile_error" and "error" in text_of(r)

    anyio.run(scenario)


def test_cancelling_a_profile_kills_its_process_and_frees_the_slot(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with stdio_session(tmp_path / "runs") as c:
            started = anyio.Event()

            async def on_progress(done: float, total: float | None, message: str | None) -> None:
                started.set()

            async def hanging_profile() -> None:
                await c.call_tool(
                    "profile_kernel",
                    {"problem": "cpu_v2/silu", "source": HANGS, "timeout_s": 120},
                    progress_callback=on_progress,
                )

            async with anyio.create_task_group() as tg:
                tg.start_soon(hanging_profile)
                with anyio.fail_after(120):
                    await started.wait()
                workers = worker_pids()
                assert len(workers) == 1, workers
                (worker,) = workers
                deadline = time.monotonic() + 90
                while not (below := descendants(worker)) and time.monotonic() < deadline:
                    await anyio.sleep(0.2)  # the compile and the references come first
                assert below, "the sandboxed kernel's processes"
                await anyio.sleep(1.0)
                below |= descendants(worker)
                tg.cancel_scope.cancel()
            deadline = time.monotonic() + 20
            while time.monotonic() < deadline and any(alive(p) for p in {worker, *below}):
                await asyncio.sleep(0.2)
            assert not [p for p in {worker, *below} if alive(p)], "the cancelled profile's processes live on"
            # the slot is free: the next profile gets a fresh worker and a verdict
            r = await c.call_tool("profile_kernel", {"problem": "cpu_v2/silu", "source": SEGFAULT})
            assert not r.is_error and r.structured_content["status"] == "runtime_error", text_of(r)
            assert worker_pids() and worker not in worker_pids()

    anyio.run(scenario)


def test_resources_and_prompts(tmp_path: Path) -> None:
    """The problem specs and primers as resources, the roles' templates as prompts: what
    AccelOpt's own roles read, rendered for the problem; unknown ones are one-line errors."""
    from mcp.shared.exceptions import MCPError

    from actors.llm.role_table import render

    async def scenario() -> None:
        async with stdio_session(tmp_path / "runs") as c:
            uris = {str(r.uri) for r in (await c.list_resources()).resources}
            assert {
                "accelopt://problems/cpu_v2/silu",
                "accelopt://primers/c",
                "accelopt://primers/triton",
            } <= uris
            templates = {t.uri_template for t in (await c.list_resource_templates()).resource_templates}
            assert templates == {"accelopt://problems/{suite}/{problem}", "accelopt://primers/{language}"}
            spec = json.loads((await c.read_resource("accelopt://problems/cpu_v2/silu")).contents[0].text)
            assert (
                spec["ref"] == "cpu_v2/silu" and spec["baseline_source"] == SILU and spec["axes"]["M"] == 512
            )
            primer = (await c.read_resource("accelopt://primers/c")).contents[0].text
            assert primer and primer in spec["primer"]
            for uri in ("accelopt://problems/cpu_v2/nope", "accelopt://primers/cobol", "file:///etc/passwd"):
                with pytest.raises(MCPError) as e:
                    await c.read_resource(uri)
                assert "\n" not in str(e.value.error.message) and e.value.error.message

            names = [p.name for p in (await c.list_prompts()).prompts]
            assert names == ["planner", "executor", "fixer", "summarizer"]
            got = await c.get_prompt("executor", {"problem": "cpu_v2/silu", "plan": "Set EXP_IMPL to 2"})
            import suites

            want = render(
                "executor",
                "c",
                problem=suites.get_problem("cpu_v2/silu"),
                source=SILU,
                plan="Set EXP_IMPL to 2",
                device="cpu",
            )
            assert [m.content.text for m in got.messages] == [m.content for m in want]
            got = await c.get_prompt("planner", {"problem": "cpu_v2/silu"})
            assert "EXP_IMPL" in got.messages[1].content.text
            for name, args in [
                ("executor", {"problem": "cpu_v2/silu"}),
                ("boss", {"problem": "cpu_v2/silu"}),
            ]:
                with pytest.raises(MCPError) as e:
                    await c.get_prompt(name, args)
                assert "\n" not in e.value.error.message

    anyio.run(scenario)
