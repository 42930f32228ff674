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
import secrets
import time
import traceback
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import mcp_types as types
import msgspec
from mcp.server import Server

from accelopt.kernel_id import kernel_id
from accelopt.profile import Profile
from cli.commands.mcp_server import library, problems, replays
from cli.commands.mcp_server.campaign_tools import campaign_tools
from cli.commands.mcp_server.campaigns import CampaignError, Campaigns
from cli.commands.mcp_server.judge import Judge, JudgeError
from cli.commands.mcp_server.memory import Memory, MemoryError_
from cli.commands.mcp_server.queue import SharedQueue, session_label
from cli.commands.mcp_server.record_tools import record_tools
from cli.commands.mcp_server.records import (
    ArgsError,
    CompareArgs,
    CompareResult,
    CompareSide,
    GetProblemArgs,
    JudgedKernel,
    ListProblemsArgs,
    ListProblemsResult,
    ProblemDetail,
    ProfileArgs,
    RecordInsightArgs,
    RecordInsightResult,
    RunRef,
    RunStatus,
    SearchMemoryArgs,
    SearchMemoryResult,
    StartRunArgs,
    decode_args,
    to_json,
    tool_schema,
)
from cli.commands.mcp_server.runs import RunError, Runs
from cli.commands.mcp_server.session_log import SessionLog
from cli.commands.mcp_server.tool import Ctx, ToolSpec

log = logging.getLogger("accelopt.mcp")
MIN_SPEEDUP = 1.05  # a pair whose fast side is less faster than this is noise, not an insight


class ToolError(Exception):
    """What the agent is told when a tool cannot answer: one line."""


def _pct(prof: Profile) -> float | None:
    frac = (
        prof.peak_fraction
        if prof.peak_fraction is not None
        else (prof.estimate.peak_fraction if prof.estimate else None)
    )
    return frac * 100.0 if frac is not None else None


def who_asked(ctx: Ctx) -> str:
    params = ctx.session.client_params
    info = params.client_info if params is not None else None
    return f"{info.name} {info.version}".strip() if info is not None else "an unnamed client"


def client_session(ctx: Ctx) -> str:
    """Who a verified pair is held for: the calling client's MCP session (over stdio the
    process's one client; over HTTP its `mcp-session-id`, which the server drew at the
    client's initialize) and the client it says it is. The stateless protocol (2026-07-28) has
    no session: there the pair_id itself, drawn at random and answered to that client alone,
    is what another client lacks."""
    transport = "stdio" if ctx.request is None else str(ctx.request.headers.get("mcp-session-id") or "")
    return f"{transport}|{who_asked(ctx)}"


def queue_session(ctx: Ctx) -> str:
    """Whom the device queue's limits and turns count a call to: the client's session."""
    return session_label(who_asked(ctx), client_session(ctx))


@dataclass(frozen=True)
class VerifiedPair:
    """A slow->fast pair this server's judge measured, interleaved, with the fast side faster."""

    problem_ref: str
    op_type: str
    device: str
    language: str
    slow_source: str
    fast_source: str
    speedup: float
    compare_call: str
    client: str  # who it is held for (`client_session`): the only one its insight may come from


class AccelOptMCP:
    """The tools, the judge and the memory of one server process (all its sessions)."""

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
        self._baselines: dict[tuple[str, str], JudgedKernel] = {}
        self._pairs: dict[str, VerifiedPair] = {}
        self._entries: dict[str, str] = {}  # memory entry id -> the session-log event that added it
        self.runs = Runs(root, self.memory.uri, session.path.parent)
        self.campaigns = Campaigns(root, self.memory.uri, session.path.parent)
        # listed as the loop goes: problems, judging, the memory, runs, campaigns, their records
        reading = self._reading_tools()
        ordered = (
            *reading[:2],
            *self._judging_tools(),
            *reading[2:],
            *self._run_tools(),
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

    def _judging_tools(self) -> tuple[ToolSpec, ...]:
        """The judge, and the memory's one way in."""
        return (
            ToolSpec(
                "profile_kernel",
                "Judge one kernel (the whole source file) as a run judges it: compiled and run in the "
                "sandbox, checked against the float64 reference on fresh seeds and adversarial inputs, "
                "timed by the trusted clock, placed on the roofline. Returns the run's Profile record: "
                "status, latency (or a cost model's estimate), % of peak, the reasons in the log, "
                "counters and stages. A failing kernel is a verdict (status + log), not a tool error.",
                ProfileArgs,
                JudgedKernel,
                self._profile_kernel,
            ),
            ToolSpec(
                "compare_kernels",
                "Measure two kernels of one problem against each other as `accelopt remeasure` does: "
                "interleaved rounds (slow, fast, then reversed), fresh seeds per round, the median of "
                "each side. Where both pass every round and the fast one is at least "
                f"{MIN_SPEEDUP:g}x faster, the pair is verified and its pair_id can carry an insight "
                "(record_insight).",
                CompareArgs,
                CompareResult,
                self._compare_kernels,
            ),
            ToolSpec(
                "record_insight",
                "Write an insight (a title and what changed and why it is faster) into the shared "
                "memory, attached to a slow->fast pair that this server's judge verified in this "
                "client's session (compare_kernels' pair_id). The entry is an event of the session's "
                "log (its source_run the session). Later runs, campaigns and agents retrieve it on "
                "every device.",
                RecordInsightArgs,
                RecordInsightResult,
                self._record_insight,
            ),
        )

    def _run_tools(self) -> tuple[ToolSpec, ...]:
        """AccelOpt's own search, as runs of this root."""
        return (
            ToolSpec(
                "start_run",
                "Start an `accelopt run` (AccelOpt's own search: planner, executor, fixer, summarizer "
                "over a beam) on problems of a suite, under this server's runs root and memory, with a "
                "hard LLM budget in USD (the offline builtin/tuner model costs nothing). Returns once the "
                "run has its id; watch_run follows it.",
                StartRunArgs,
                RunStatus,
                self._start_run,
            ),
            ToolSpec(
                "watch_run",
                "A run's state and figures as `accelopt runs` gives them (state, iterations, kernels, "
                "speedup, % of peak, cost against its budget), any run of this root.",
                RunRef,
                RunStatus,
                self._watch_run,
            ),
            ToolSpec(
                "stop_run",
                "Stop a run this server started (SIGTERM, as Ctrl-C: the run unwinds; the result says "
                "the state it was left in, as `accelopt runs` says it).",
                RunRef,
                RunStatus,
                self._stop_run,
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
            return _error(f"internal error in {tool.name}: {type(e).__name__}: {_line(str(e))}")
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
                    device, {"op": "spec", "problem": args.problem}, limit_s=600.0, progress=_progress(ctx)
                )
                roof = None if "error" in reply else reply
                note = reply.get("error", "")
            except JudgeError as e:
                note = str(e)
        detail = problems.problem_detail(args.problem, problem, device, language, roof, note)
        if args.baseline_profile:
            detail.baseline = await self._baseline(
                ctx, args.problem, device, language, detail.baseline_source
            )
        summary = f"{args.problem} on {device} ({language}): {problem.definition.op_type}, axes {detail.axes}"
        if detail.roofline is not None:
            summary += f", roofline {detail.roofline.t_peak_ms:.4g} ms ({detail.roofline.bound}-bound)"
        if detail.baseline is not None:
            summary += f", baseline {_verdict(detail.baseline)}"
        return detail, summary

    async def _baseline(self, ctx: Ctx, ref: str, device: str, language: str, source: str) -> JudgedKernel:
        key = (ref, device)
        if key not in self._baselines:
            self._baselines[key] = await self.judge_kernel(
                ctx, ref, device, language, source, None, "get_problem"
            )
        return self._baselines[key]

    async def _profile_kernel(self, ctx: Ctx, args: ProfileArgs) -> tuple[JudgedKernel, str]:
        _, device, language = await asyncio.to_thread(problems.resolve, args.problem, args.device)
        if args.language is not None and args.language != language:
            raise ToolError(f"problem {args.problem!r} is written in {language}, not {args.language}")
        judged = await self.judge_kernel(
            ctx, args.problem, device, language, args.source, args.timeout_s, "profile_kernel"
        )
        return judged, f"{args.problem} on {device}: {_verdict(judged)} (kernel {judged.kernel_id[:12]})"

    async def judge_kernel(
        self, ctx: Ctx, ref: str, device: str, language: str, source: str, timeout_s: float | None, tool: str
    ) -> JudgedKernel:
        """One kernel through the judge, on fresh seeds this server draws; recorded in the log."""
        from actors.roles.profiler import offset_seeds
        from actors.runtime.kernel_remeasure import fresh_seed_base
        from hardware_agents.families import profile_timeout_s

        problem_name = ref.rpartition("/")[2]
        kid = kernel_id(problem_name, language, source)
        seed_offset = fresh_seed_base()
        seeds = list(offset_seeds(seed_offset))
        limit = (timeout_s or profile_timeout_s(device)) * 4 + 120.0
        req = {
            "op": "profile",
            "problem": ref,
            "kernel_id": kid,
            "language": language,
            "source": source,
            "seeds": seeds,
            "seed_offset": seed_offset,
            "timeout_s": timeout_s,
        }
        reply = await self.queue.request(
            queue_session(ctx), device, req, limit_s=limit, progress=_progress(ctx)
        )
        if "error" in reply:
            raise ToolError(f"{ref}: the problem's side failed: {reply['error']}")
        prof = msgspec.convert(reply["profile"], Profile)
        judged = JudgedKernel(
            kernel_id=kid,
            problem=ref,
            device=device,
            language=language,
            status=prof.status,
            latency_ms=prof.latency_ms,
            estimated_ms=prof.estimated_ms,
            pct_peak=_pct(prof),
            seeds=seeds,
            profile=prof,
        )
        judged.event_id = await self.session.judged(who_asked(ctx), tool, ref, source, judged)
        return judged

    async def _compare_kernels(self, ctx: Ctx, args: CompareArgs) -> tuple[CompareResult, str]:
        from accelopt.catalog import RemeasuredSide
        from actors.runtime.kernel_remeasure import fresh_seed_base, round_seed_lists
        from hardware_agents.families import profile_timeout_s

        problem, device, language = await asyncio.to_thread(problems.resolve, args.problem, args.device)
        if args.language is not None and args.language != language:
            raise ToolError(f"problem {args.problem!r} is written in {language}, not {args.language}")
        slow_id = kernel_id(problem.name, language, args.slow_source)
        fast_id = kernel_id(problem.name, language, args.fast_source)
        if slow_id == fast_id:
            raise ToolError("slow_source and fast_source are the same kernel")
        base_seed = fresh_seed_base()
        req = {
            "op": "compare",
            "problem": args.problem,
            "language": language,
            "kernels": [
                {"kernel_id": slow_id, "source": args.slow_source},
                {"kernel_id": fast_id, "source": args.fast_source},
            ],
            "rounds": args.rounds,
            "base_seed": base_seed,
        }
        limit = (profile_timeout_s(device) * 4 + 120.0) * 2 * args.rounds
        reply = await self.queue.request(
            queue_session(ctx), device, req, limit_s=limit, progress=_progress(ctx)
        )
        if "error" in reply:
            raise ToolError(f"{args.problem}: the problem's side failed: {reply['error']}")
        slow, fast = (msgspec.convert(m, RemeasuredSide) for m in reply["measures"])
        profiles = [(kid, msgspec.convert(p, Profile)) for kid, p in reply["profiles"]]
        call = await self.session.compared(
            who_asked(ctx),
            args.problem,
            device,
            language,
            [(slow_id, args.slow_source), (fast_id, args.fast_source)],
            profiles,
        )
        speedup = slow.median_ms / fast.median_ms if slow.median_ms and fast.median_ms else None
        verified = bool(
            slow.status == fast.status == "passed"
            and len(slow.rounds_ms) == len(fast.rounds_ms) == args.rounds
            and speedup is not None
            and speedup >= MIN_SPEEDUP
        )
        result = CompareResult(
            problem=args.problem,
            device=device,
            rounds=args.rounds,
            seeds=round_seed_lists(base_seed, args.rounds),
            slow=_side(slow),
            fast=_side(fast),
            speedup=speedup,
            verified=verified,
            event_id=call,
        )
        if verified:
            assert speedup is not None
            result.pair_id = ev_id = secrets.token_hex(16)  # not derivable from the kernels
            self._pairs[ev_id] = VerifiedPair(
                args.problem,
                problem.definition.op_type,
                device,
                language,
                args.slow_source,
                args.fast_source,
                speedup,
                call,
                client_session(ctx),
            )
        ratio = f"{speedup:.3f}x" if speedup is not None else "no speedup (a side did not pass)"
        why = "verified: pair_id " + result.pair_id if verified else "not verified"
        return result, f"{args.problem} on {device}, {args.rounds} interleaved rounds: {ratio}; {why}"

    async def _record_insight(self, ctx: Ctx, args: RecordInsightArgs) -> tuple[RecordInsightResult, str]:
        from accelopt.catalog import derive_event_id
        from accelopt.records import MemoryEntry

        pair = self._pairs.get(args.pair_id)
        if pair is None or pair.client != client_session(ctx):  # another client's is not this one's
            raise ToolError(
                f"pair {args.pair_id!r} was not verified by this server's judge in this client's session: "
                "compare_kernels gives a pair_id where the fast kernel passed every round and was faster"
            )
        sid = self.session.session_id
        problem = pair.problem_ref.rpartition("/")[2]
        slow_id = kernel_id(problem, pair.language, pair.slow_source)
        fast_id = kernel_id(problem, pair.language, pair.fast_source)
        entry = MemoryEntry(
            id=derive_event_id(sid, "MemoryEntry", sid, slow_id, fast_id),  # once per pair and session
            source_run=sid,
            problem=problem,
            op_type=pair.op_type,
            device=pair.device,
            language=pair.language,
            slow_kernel=pair.slow_source,
            fast_kernel=pair.fast_source,
            speedup=pair.speedup,
            title=args.title,
            text=args.text,
            created_at=time.time(),
        )
        # the log first (the entry is its event: `memory rebuild` projects it), then the table
        event_id = self._entries.get(entry.id)
        if event_id is None:
            event_id = self._entries[entry.id] = await self.session.insight(
                pair.compare_call, pair.problem_ref, entry, who_asked(ctx), args.pair_id
            )
        written = await self.memory.add(entry)
        result = RecordInsightResult(
            entry_id=entry.id, memory=self.memory.uri, written=written, entry=entry, event_id=event_id
        )
        what = "written to" if written else "already in"
        return (
            result,
            f"insight {entry.id[:12]} ({pair.speedup:.2f}x on {pair.problem_ref}) {what} {self.memory.uri}",
        )

    async def _start_run(self, ctx: Ctx, args: StartRunArgs) -> tuple[RunStatus, str]:
        for name in args.problems:
            await asyncio.to_thread(problems.resolve, f"{args.suite}/{name}", args.device)
        status = await self.runs.start(args)
        return status, f"run {status.run_id} started ({status.state}), budget ${args.budget_usd:g}"

    async def _watch_run(self, ctx: Ctx, args: RunRef) -> tuple[RunStatus, str]:
        s = await asyncio.to_thread(self.runs.status, args.run_id)
        speed = f", speedup {s.speedup_geomean:.2f}x" if s.speedup_geomean else ""
        it = f"{s.iterations_done}/{s.iterations_planned}" if s.iterations_planned else str(s.iterations_done)
        return s, f"run {s.run_id}: {s.label or s.state}, iterations {it}, {s.kernels} kernels{speed}"

    async def _stop_run(self, ctx: Ctx, args: RunRef) -> tuple[RunStatus, str]:
        s = await self.runs.stop(args.run_id)
        return s, f"run {s.run_id}: {s.label or s.state}"

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


def _side(m: Any) -> CompareSide:
    return CompareSide(
        kernel_id=m.kernel_id,
        status=m.status,
        rounds_ms=m.rounds_ms,
        median_ms=m.median_ms,
        log_head=m.log_head,
    )


def _verdict(j: JudgedKernel) -> str:
    if j.latency_ms is not None:
        pct = f", {j.pct_peak:.1f}% of peak" if j.pct_peak is not None else ""
        return f"{j.status}, {j.latency_ms:.4g} ms{pct}"
    if j.estimated_ms is not None:
        return f"{j.status}, ESTIMATED {j.estimated_ms:.4g} ms"
    head = _line(j.profile.log)
    return f"{j.status}" + (f": {head[:200]}" if head else "")


def _line(text: str) -> str:
    return next((ln.strip() for ln in text.splitlines() if ln.strip()), "")


def _error(text: str) -> types.CallToolResult:
    one = "; ".join(ln.strip() for ln in text.splitlines() if ln.strip()) or "error"
    return types.CallToolResult(content=[types.TextContent(type="text", text=one)], is_error=True)


def _progress(ctx: Ctx) -> Callable[[float, float, str], Awaitable[None]]:
    async def report(done: float, total: float, message: str) -> None:
        try:
            await ctx.session.report_progress(round(done, 1), total, message)
        except Exception:  # a client gone mid-profile: the profile's fate is the caller's cancel
            log.debug("progress not delivered", exc_info=True)

    return report


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("accelopt")
    except PackageNotFoundError:
        return "0"
