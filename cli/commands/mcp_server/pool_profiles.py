"""Profiles of the MCP server sent to the profilers of the warm pool of `accelopt up` (the
pool runs on the server's root: `<root>/.pool.json`), as a run's coordinator sends its own:
a `ProfileRequested` on the pool's log, answered by a `KernelProfiled`. The pool's profiler
of a device serves every run on the stream from one work queue, so runs, campaigns and agent
sessions share that device's queue.

The pool serves the server where it would serve a run of the server's settings
(`actors.runtime.pool.attach_check`: the device among its profilers, the same memory,
profiling, sandbox and delivery settings). A profiler takes its problem from its run's
`RunStarted`, so each problem (and device) the session profiles on the pool gets a stream run
of its own, `<session>-p<N>`, opened by a `RunStarted` of the session's settings with that one
target, and closed (`RunCompleted`) when the server ends. The agent's `timeout_s` does not
travel: the pool's profilers time out as they were started (`profiling` settings). A
profile given up on (the call cancelled, or no answer within the server's limit) is stopped
on the pool: the server publishes a `ProfileCancelled` of the request, and the profiler running it kills that
profile's sandboxed children (its cancel scope: `hardware_agents/sandbox/cancel.py`, never
another request's) and answers the request at once with a `timeout` profile of reason
`cancelled`, so the device is free for the next request and no request is left unanswered; a
request the profiler has not taken yet is answered so without running. What the profiler does
in its own process (not in a child) stops at the profile's next stage.
"""

from __future__ import annotations

import asyncio
import contextlib
import secrets
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import msgspec

from accelopt import catalog as ev
from accelopt.config import RunConfig
from accelopt.profile import Profile
from accelopt.remeasure import Remeasure
from cli.commands.mcp_server.judge import JudgeError, Progress

if TYPE_CHECKING:
    from actors.runtime.pool import PoolInfo
    from events.log import EventLog


class PoolProfiles:
    def __init__(self, root: str | Path, memory_uri: str, session_id: str, toolchain: dict[str, str]) -> None:
        cfg = RunConfig(root=str(root))
        self.cfg = msgspec.structs.replace(cfg, memory=msgspec.structs.replace(cfg.memory, uri=memory_uri))
        self.session_id = session_id
        self.toolchain = toolchain
        self._log: EventLog | None = None
        self._url = ""
        self._runs: dict[tuple[str, str, str], str] = {}  # (pool log, problem ref, device) -> stream run
        self._lock = asyncio.Lock()

    def pool_for(self, device: str) -> tuple[PoolInfo | None, str | None]:
        """The pool that profiles `device` for this server, else None and why not (None where
        no pool runs on the root)."""
        from actors.runtime.pool import attach_check

        return attach_check(self.cfg, [device])

    async def _connect(self, url: str) -> EventLog:
        from events.log import EventLog

        if self._log is None or self._url != url:  # a pool started again has a log of its own
            if self._log is not None:
                await self._log.close()
            self._log = await EventLog.connect(url, create=False, name=f"accelopt-mcp-{self.session_id}")
            self._url = url
        return self._log

    async def _run_for(self, elog: EventLog, ref: str, device: str, language: str) -> str:
        """The stream run that carries this session's profiles of `ref` on `device`."""
        async with self._lock:
            key = (self._url, ref, device)
            run_id = self._runs.get(key)
            if run_id is None:
                import suites

                problem = await asyncio.to_thread(suites.get_problem, ref)
                run_id = f"{self.session_id}-p{len(self._runs) + 1}"
                started = ev.RunStarted(
                    **ev.envelope(ev.RunStarted, run_id, ts=time.time()),
                    config=self.cfg.to_dict(),
                    seed=0,
                    targets=[
                        ev.ProblemTarget(
                            problem=problem,
                            device=device,
                            language=language,
                            content_hash=problem.content_hash(),
                        )
                    ],
                    toolchain=self.toolchain,
                    kernel_ids="content",
                )
                await elog.publish(started)
                self._runs[key] = run_id
            return run_id

    async def _profile(
        self,
        elog: EventLog,
        run_id: str,
        request: ev.ProfileRequested,
        deadline: float,
        limit_s: float,
        progress: Progress | None,
        what: str,
    ) -> Profile:
        """Publish `request` and wait for its KernelProfiled (until `deadline`)."""
        from events.subjects import role_filter

        sent = await elog.publish(request)
        why = "the agent cancelled the call"
        try:
            async for _, event, _ in elog.follow(role_filter("KernelProfiled", run_id), from_seq=sent.seq):
                if isinstance(event, ev.KernelProfiled) and event.request_id == request.event_id:
                    why = ""
                    return event.profile
                left = deadline - time.monotonic()
                if left <= 0:
                    why = f"no verdict within the MCP server's limit of {limit_s:.0f} s"
                    raise JudgeError(
                        f"no verdict from the pool's profiler within {limit_s:.0f} s (it serves runs too: "
                        "it may still be busy with theirs); the profile was cancelled on the pool"
                    )
                if progress is not None:
                    await progress(limit_s - left, limit_s, what)
            why = "the pool's log stopped"
            raise JudgeError("the pool's log stopped")  # follow() yields forever
        except Exception as e:
            if why == "the agent cancelled the call":
                why = f"the MCP server stopped waiting ({type(e).__name__})"
            raise
        finally:
            if why:  # given up on: stopped on the pool too
                await self._cancel(elog, request, why)

    @staticmethod
    async def _cancel(elog: EventLog, request: ev.ProfileRequested, why: str) -> None:
        """Publish the `ProfileCancelled` of `request`, even from a cancelled call (shielded,
        a few seconds at most: a lost log loses only the cancellation)."""
        import anyio

        cancelled = ev.ProfileCancelled(
            **ev.envelope(
                ev.ProfileCancelled, request.run_id, request.event_id, ts=time.time(), cause=request
            ),
            request_id=request.event_id,
            reason=why,
        )
        with anyio.move_on_after(5.0, shield=True), contextlib.suppress(Exception):
            await elog.publish(cancelled, retry_for=4.0)

    def _request(
        self, run_id: str, req: dict[str, Any], kernel_id: str, source: str, purpose: Any, seed_offset: int
    ) -> ev.ProfileRequested:
        return ev.ProfileRequested(
            **ev.envelope(ev.ProfileRequested, run_id, secrets.token_hex(8), ts=time.time()),
            kernel_id=kernel_id,
            problem=req["problem"].rpartition("/")[2],
            device=req["device"],
            language=req["language"],
            source=source,
            purpose=purpose,
            seed_offset=seed_offset,
        )

    async def request(
        self, pool: PoolInfo, device: str, req: dict[str, Any], *, limit_s: float, progress: Progress | None
    ) -> dict[str, Any]:
        """`req` (the judge's profile or compare request) answered by the pool's profilers, in
        the shape `judge.Judge.request` answers it."""
        try:
            elog = await self._connect(pool.nats_url)
            req = {**req, "device": device}
            run_id = await self._run_for(elog, req["problem"], device, req["language"])
            deadline = time.monotonic() + limit_s
            if req["op"] == "profile":
                # "reverify": the profiler's cache of a run's kernels is not used (the agent asks again to know)
                r = self._request(
                    run_id, req, req["kernel_id"], req["source"], "reverify", req["seed_offset"]
                )
                what = f"profile of {req['problem']} on the pool's {device} profiler"
                prof = await self._profile(elog, run_id, r, deadline, limit_s, progress, what)
                return {"profile": msgspec.to_builtins(prof)}
            return await self._compare(elog, run_id, req, deadline, limit_s, progress)
        except ConnectionError as e:
            raise JudgeError(f"the pool's log: {e}") from None

    async def _compare(
        self,
        elog: EventLog,
        run_id: str,
        req: dict[str, Any],
        deadline: float,
        limit_s: float,
        progress: Progress | None,
    ) -> dict[str, Any]:
        """`accelopt remeasure`'s interleaved rounds (`accelopt.remeasure.Remeasure`, every side
        to its end), each profile a request to the pool."""
        from actors.runtime.kernel_remeasure import interleaved_sides

        kernels = req["kernels"]
        protocol = Remeasure(len(kernels), req["rounds"], req["base_seed"], every_side=True)
        profiles: list[list[Any]] = []
        while (slot := protocol.next_slot()) is not None:
            k = kernels[slot.side]
            r = self._request(run_id, req, k["kernel_id"], k["source"], "remeasure", slot.seed_offset)
            what = (
                f"{req['problem']}: {'slow' if slot.side == 0 else 'fast'} kernel, round "
                f"{slot.round + 1}/{req['rounds']} on the pool's {req['device']} profiler"
            )
            prof = await self._profile(elog, run_id, r, deadline, limit_s, progress, what)
            protocol.record(slot, prof)
            profiles.append([k["kernel_id"], msgspec.to_builtins(prof)])
        measures = interleaved_sides(protocol, [k["kernel_id"] for k in kernels])
        return {"measures": [msgspec.to_builtins(m) for m in measures], "profiles": profiles}

    async def close(self) -> None:
        """Each stream run of the session completed, the connection closed."""
        if self._log is None:
            return
        with contextlib.suppress(Exception):
            for (url, _, _), run_id in self._runs.items():
                if url == self._url:
                    done = ev.RunCompleted(
                        **ev.envelope(ev.RunCompleted, run_id, ts=time.time()),
                        reason="the agent session ended",
                    )
                    await self._log.publish(done, retry_for=5.0)
        await self._log.close()
        self._log = None
