"""The judging tools (profile_kernel, compare_kernels, record_insight): kernels through the
device queue on fresh seeds this server draws, verified slow->fast pairs held for the client
that measured them, and the memory's one way in. Every verdict, comparison and insight is an
event of the session's log (`session_log.py`)."""

from __future__ import annotations

import asyncio
import secrets
import time
from dataclasses import dataclass
from typing import Any

import msgspec

from accelopt.kernel_id import kernel_id
from accelopt.profile import Profile
from cli.commands.mcp_server import problems
from cli.commands.mcp_server.memory import Memory
from cli.commands.mcp_server.queue import SharedQueue, session_label
from cli.commands.mcp_server.records import (
    CompareArgs,
    CompareResult,
    CompareSide,
    JudgedKernel,
    ProfileArgs,
    RecordInsightArgs,
    RecordInsightResult,
)
from cli.commands.mcp_server.session_log import SessionLog
from cli.commands.mcp_server.tool import (
    Ctx,
    ToolError,
    ToolSpec,
    client_session,
    first_line,
    progress,
    who_asked,
)

MIN_SPEEDUP = 1.05  # a pair whose fast side is less faster than this is noise, not an insight


def _pct(prof: Profile) -> float | None:
    frac = (
        prof.peak_fraction
        if prof.peak_fraction is not None
        else (prof.estimate.peak_fraction if prof.estimate else None)
    )
    return frac * 100.0 if frac is not None else None


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


class JudgingTools:
    """The judge's tools of one server process: the device queue, the session's log, the
    memory, and what they hold between calls (baselines, verified pairs, insights written)."""

    def __init__(self, queue: SharedQueue, session: SessionLog, memory: Memory) -> None:
        self.queue = queue
        self.session = session
        self.memory = memory
        self._baselines: dict[tuple[str, str], JudgedKernel] = {}
        self._pairs: dict[str, VerifiedPair] = {}
        self._entries: dict[str, str] = {}  # memory entry id -> the session-log event that added it

    def tools(self) -> tuple[ToolSpec, ...]:
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

    async def baseline(self, ctx: Ctx, ref: str, device: str, language: str, source: str) -> JudgedKernel:
        key = (ref, device)
        if key not in self._baselines:
            self._baselines[key] = await self.judge_kernel(
                ctx, ref, device, language, source, None, "get_problem"
            )
        return self._baselines[key]

    async def _profile_kernel(self, ctx: Ctx, args: ProfileArgs) -> tuple[JudgedKernel, str]:
        problem, device, language = await asyncio.to_thread(problems.resolve, args.problem, args.device)
        if args.language is not None and args.language != language:
            raise ToolError(f"problem {args.problem!r} is written in {language}, not {args.language}")
        # the agent's next search by this kernel: embedded while the judge compiles it
        self.memory.prefetch(problem.name, problem.definition.op_type, args.source)
        judged = await self.judge_kernel(
            ctx, args.problem, device, language, args.source, args.timeout_s, "profile_kernel"
        )
        return judged, f"{args.problem} on {device}: {verdict(judged)} (kernel {judged.kernel_id[:12]})"

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
            queue_session(ctx), device, req, limit_s=limit, progress=progress(ctx)
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
            queue_session(ctx), device, req, limit_s=limit, progress=progress(ctx)
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


def _side(m: Any) -> CompareSide:
    return CompareSide(
        kernel_id=m.kernel_id,
        status=m.status,
        rounds_ms=m.rounds_ms,
        median_ms=m.median_ms,
        log_head=m.log_head,
    )


def verdict(j: JudgedKernel) -> str:
    if j.latency_ms is not None:
        pct = f", {j.pct_peak:.1f}% of peak" if j.pct_peak is not None else ""
        return f"{j.status}, {j.latency_ms:.4g} ms{pct}"
    if j.estimated_ms is not None:
        return f"{j.status}, ESTIMATED {j.estimated_ms:.4g} ms"
    head = first_line(j.profile.log)
    return f"{j.status}" + (f": {head[:200]}" if head else "")
