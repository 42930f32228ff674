"""`accelopt mcp`'s server: AccelOpt's judge and memory as Model Context Protocol tools, on
the `mcp` SDK's low-level server (schemas from `records.py`, not from type hints).

Every tool answers with a structured result and a one-line text summary, or with `isError`
and one line saying what was wrong (bad arguments, an unknown problem or device, a judge that
gave no verdict); a traceback goes to the server's stderr, never to the agent, and no tool
call takes the server down. A kernel's failure is a verdict, not an error: its status and log
are the result. Calls that judge or change something are events of the session's log
(`session_log.py`).
"""

from __future__ import annotations

import asyncio
import logging
import traceback
from pathlib import Path
from typing import Any

import mcp_types as types
from mcp.server import Server

from cli.commands.mcp_server import library, problems, replays
from cli.commands.mcp_server.campaign_tools import campaign_tools
from cli.commands.mcp_server.campaigns import CampaignError, Campaigns
from cli.commands.mcp_server.judge import Judge, JudgeError
from cli.commands.mcp_server.judging_tools import JudgingTools, verdict
from cli.commands.mcp_server.memory import Memory, MemoryError_
from cli.commands.mcp_server.queue import SharedQueue
from cli.commands.mcp_server.record_tools import record_tools
from cli.commands.mcp_server.records import (
    ArgsError,
    GetProblemArgs,
    ListProblemsArgs,
    ListProblemsResult,
    ProblemDetail,
    SearchMemoryArgs,
    SearchMemoryResult,
    decode_args,
    to_json,
    tool_schema,
)
from cli.commands.mcp_server.run_tools import run_tools
from cli.commands.mcp_server.runs import RunError, Runs
from cli.commands.mcp_server.session_log import SessionLog
from cli.commands.mcp_server.tool import Ctx, ToolError, ToolSpec, first_line, progress

log = logging.getLogger("accelopt.mcp")


class AccelOptMCP:
    """The tools, the judge and the memory of one server process (all its sessions): the MCP
    surface (tools, resources, prompts) over the tool modules of this folder."""

    def __init__(
        self,
        *,
        root: str | Path,
        memory_uri: str | Path,
        judge: Judge,
        session: SessionLog,
        queue: SharedQueue | None = None,
    ) -> None:
        self.root = Path(root)
        self.judge = judge
        # every profile and compare: the device queue (limits, turns; the pool's profilers or the judge)
        self.queue = queue or SharedQueue(judge, root=root, server=session.session_id)
        self.memory = Memory(memory_uri)
        self.session = session
        self.judging = JudgingTools(self.queue, session, self.memory)
        self.runs = Runs(root, self.memory.uri, session.path.parent)
        self.campaigns = Campaigns(root, self.memory.uri, session.path.parent)
        # listed as the loop goes: problems, judging, the memory, runs, campaigns, their records
        reading = self._reading_tools()
        ordered = (
            *reading[:2],
            *self.judging.tools(),
            *reading[2:],
            *run_tools(self.runs),
            *campaign_tools(self.campaigns),
            *record_tools(self.root),
        )
        self.tools = {t.name: t for t in ordered}

    def _reading_tools(self) -> tuple[ToolSpec, ...]:
        """The problems and the memory."""
        return (
            ToolSpec(
                "list_problems",
                "The problems of the installed suites (filter by suite, device kind, device family "
                "or op type). Each row's `ref` (SUITE/PROBLEM) is what the other tools take.",
                ListProblemsArgs,
                ListProblemsResult,
                self._list_problems,
            ),
            ToolSpec(
                "get_problem",
                "One problem in full: the reference, shapes, dtypes, tolerances, the kernel interface, "
                "the correctness bar, the device's roofline at these shapes, the baseline's source "
                "(and, with baseline_profile, its profile by this judge) and the language's primer: what "
                "AccelOpt's own planner reads.",
                GetProblemArgs,
                ProblemDetail,
                self._get_problem,
            ),
            ToolSpec(
                "search_memory",
                "Search the optimization memory (verified slow->fast pairs with their insights, from "
                "runs, campaigns and agent sessions, on every device) by a query text, or by a kernel "
                "as a run's planner asks for it. Each hit has its speedup, the change as a diff, and "
                "its provenance (source run, kernel ids).",
                SearchMemoryArgs,
                SearchMemoryResult,
                self._search_memory,
            ),
        )

    # --- the MCP surface ------------------------------------------------------------------

    def server(self) -> Server[Any]:
        return Server(
            "accelopt",
            version=_version(),
            instructions=(
                "AccelOpt: a trusted judge (sandbox, fresh inputs, trusted clock, roofline) and a shared "
                "memory of verified slow->fast kernel pairs. Loop: list_problems, get_problem, "
                "search_memory, write a kernel, profile_kernel, read the status and log, repeat."
            ),
            on_list_tools=self._on_list_tools,
            on_call_tool=self._on_call_tool,
            on_list_resources=self._on_list_resources,
            on_list_resource_templates=self._on_list_templates,
            on_read_resource=self._on_read_resource,
            on_list_prompts=self._on_list_prompts,
            on_get_prompt=self._on_get_prompt,
        )

    async def _on_list_resources(
        self, ctx: Ctx, params: types.PaginatedRequestParams | None
    ) -> types.ListResourcesResult:
        return types.ListResourcesResult(resources=await asyncio.to_thread(library.list_resources))

    async def _on_list_templates(
        self, ctx: Ctx, params: types.PaginatedRequestParams | None
    ) -> types.ListResourceTemplatesResult:
        return types.ListResourceTemplatesResult(resource_templates=library.templates())

    async def _on_read_resource(
        self, ctx: Ctx, params: types.ReadResourceRequestParams
    ) -> types.ReadResourceResult:
        return await asyncio.to_thread(library.read, str(params.uri))

    async def _on_list_prompts(
        self, ctx: Ctx, params: types.PaginatedRequestParams | None
    ) -> types.ListPromptsResult:
        return types.ListPromptsResult(prompts=library.list_prompts())

    async def _on_get_prompt(self, ctx: Ctx, params: types.GetPromptRequestParams) -> types.GetPromptResult:
        return await asyncio.to_thread(library.get_prompt, params.name, params.arguments)

    async def _on_list_tools(
        self, ctx: Ctx, params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        return types.ListToolsResult(
            tools=[
                types.Tool(
                    name=t.name,
                    description=t.description,
                    input_schema=tool_schema(t.args),
                    output_schema=tool_schema(t.result),
                )
                for t in self.tools.values()
            ]
        )

    async def _on_call_tool(self, ctx: Ctx, params: types.CallToolRequestParams) -> types.CallToolResult:
        tool = self.tools.get(params.name)
        if tool is None:
            return _error(f"unknown tool {params.name!r}; tools: {', '.join(self.tools)}")
        try:
            args = decode_args(params.arguments, tool.args)
            result, summary = await tool.handler(ctx, args)
        except (
            ArgsError,
            ToolError,
            JudgeError,
            MemoryError_,
            RunError,
            CampaignError,
            replays.ReplayError,
            problems.UnknownError,
        ) as e:
            return _error(str(e))
        except Exception as e:  # a bug of ours: the agent gets one line, the operator the traceback
            log.error("tool %s failed:\n%s", tool.name, traceback.format_exc())
            return _error(f"internal error in {tool.name}: {type(e).__name__}: {first_line(str(e))}")
        return types.CallToolResult(
            content=[types.TextContent(type="text", text=summary)],
            structured_content=to_json(result),
        )

    # --- tools ----------------------------------------------------------------------------

    async def _list_problems(self, ctx: Ctx, args: ListProblemsArgs) -> tuple[ListProblemsResult, str]:
        rows = await asyncio.to_thread(problems.list_problems, args)
        return ListProblemsResult(problems=rows), f"{len(rows)} problems: " + ", ".join(
            r.ref for r in rows[:20]
        ) + (" ..." if len(rows) > 20 else "")

    async def _get_problem(self, ctx: Ctx, args: GetProblemArgs) -> tuple[ProblemDetail, str]:
        problem, device, language = await asyncio.to_thread(problems.resolve, args.problem, args.device)
        roof = await asyncio.to_thread(problems.static_roofline, problem, device)
        note = ""
        if roof is None:  # peaks measured on this host: its worker knows them
            try:
                reply = await self.judge.request(
                    device, {"op": "spec", "problem": args.problem}, limit_s=600.0, progress=progress(ctx)
                )
                roof = None if "error" in reply else reply
                note = reply.get("error", "")
            except JudgeError as e:
                note = str(e)
        detail = problems.problem_detail(args.problem, problem, device, language, roof, note)
        # an agent's next step is a search of the memory by this baseline
        self.memory.prefetch(problem.name, problem.definition.op_type, detail.baseline_source)
        if args.baseline_profile:
            detail.baseline = await self.judging.baseline(
                ctx, args.problem, device, language, detail.baseline_source
            )
        summary = f"{args.problem} on {device} ({language}): {problem.definition.op_type}, axes {detail.axes}"
        if detail.roofline is not None:
            summary += f", roofline {detail.roofline.t_peak_ms:.4g} ms ({detail.roofline.bound}-bound)"
        if detail.baseline is not None:
            summary += f", baseline {verdict(detail.baseline)}"
        return detail, summary

    async def _search_memory(self, ctx: Ctx, args: SearchMemoryArgs) -> tuple[SearchMemoryResult, str]:
        if (args.query is None) == (args.kernel is None):
            raise ToolError("give either query (a text) or kernel (a source), not both or neither")
        op_type = name = None
        if args.problem is not None:
            problem, _, _ = await asyncio.to_thread(problems.resolve, args.problem, None)
            op_type, name = problem.definition.op_type, problem.name
        result = await self.memory.search(args, op_type, name)
        top = "; ".join(f"{h.title} ({h.speedup:.2f}x, {h.problem}/{h.device})" for h in result.hits[:3])
        return result, f"{len(result.hits)} hits in {result.memory}" + (f": {top}" if top else "")


def _error(text: str) -> types.CallToolResult:
    one = "; ".join(ln.strip() for ln in text.splitlines() if ln.strip()) or "error"
    return types.CallToolResult(content=[types.TextContent(type="text", text=one)], is_error=True)


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("accelopt")
    except PackageNotFoundError:
        return "0"
