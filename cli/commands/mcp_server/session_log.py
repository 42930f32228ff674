"""An agent session's log, in the shape of a run's: `<root>/<session id>/log.aolog`, the
exported-log format every reader takes (`accelopt runs`, `report`, `replay --verify`, the
dashboard). It opens with a `RunStarted` (no targets: the agent, not a coordinator, decides
what to try) and holds, per kernel the judge judged, the kernel as the agent proposed it
(`KernelProposed`, its `request_id` the tool call's) and the verdict (`KernelProfiled`, its
`worker` saying who asked through which tool); a compare, both kernels and every round's
profile; an insight the agent recorded on a verified pair, an `InsightSummarized` answering
the compare and the memory entry it makes, an `AgentMemoryEntryAdded` (the report lists it
with a run's entries; `accelopt memory rebuild` projects it). Nothing in it is a coordinator's
decision, so a replay re-derives none and verifies every event as an input.

The file is rewritten whole (atomically: a reader never sees half of it) after every event,
so a server killed at any moment leaves every verdict it gave on disk. While the server
serves, it holds the session's run lock (`accelopt runs` says running); a session that ends
says completed, one whose server was killed interrupted.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import TYPE_CHECKING

from accelopt import catalog as ev
from accelopt.config import RunConfig
from accelopt.folders import private_folder
from accelopt.profile import Profile
from events.logfile import write_events
from replay.runstate import RunLock

if TYPE_CHECKING:
    from accelopt.records import MemoryEntry
    from cli.commands.mcp_server.records import JudgedKernel


class SessionLog:
    def __init__(
        self, root: str | Path, session_id: str, *, memory_uri: str, toolchain: dict[str, str]
    ) -> None:
        self.session_id = session_id
        self.root = Path(root)
        self.path = Path(root) / session_id / "log.aolog"
        self._lock = asyncio.Lock()
        self._calls = 0
        private_folder(self.path.parent)  # its own folder 0700 too: a --root of . is left as it is
        cfg = RunConfig(root=str(root))
        config = cfg.to_dict()
        config["memory"] = {**config.get("memory", {}), "uri": memory_uri}
        self.events: list[ev.Event] = [
            ev.RunStarted(
                **ev.envelope(ev.RunStarted, session_id, ts=time.time()),
                config=config,
                seed=0,
                targets=[],
                toolchain=toolchain,
                kernel_ids="content",
            )
        ]
        self._write()

    def lock(self) -> RunLock:
        """The session's lock, to hold while serving (nothing resumes an agent session)."""
        return RunLock(self.root, self.session_id, resume="")

    def _write(self) -> None:
        write_events(self.path, self.events)

    def _proposed(
        self, call: str, problem: str, kernel_id: str, language: str, source: str
    ) -> ev.KernelProposed:
        return ev.KernelProposed(
            **ev.envelope(ev.KernelProposed, self.session_id, call, kernel_id, ts=time.time()),
            kernel_id=kernel_id,
            problem=problem,
            iteration=0,
            parent_id=None,
            plan_id=None,
            request_id=call,
            language=language,
            source=source,
        )

    def _profiled(
        self, call: str, problem: str, kernel_id: str, device: str, profile: Profile, who: str, *key: object
    ) -> ev.KernelProfiled:
        return ev.KernelProfiled(
            **ev.envelope(ev.KernelProfiled, self.session_id, call, kernel_id, *key, ts=time.time()),
            kernel_id=kernel_id,
            problem=problem,
            device=device,
            request_id=call,
            profile=profile,
            worker=who,
        )

    async def _append(self, events: list[ev.Event]) -> None:
        self.events += events
        await asyncio.to_thread(self._write)

    def _call(self) -> str:
        self._calls += 1
        return ev.derive_event_id(self.session_id, "AgentCall", self._calls)

    async def judged(self, who: str, tool: str, problem_ref: str, source: str, judged: JudgedKernel) -> str:
        """Record one verdict; the id of its event."""
        async with self._lock:
            call = self._call()
            problem = problem_ref.rpartition("/")[2]
            proposed = self._proposed(call, problem, judged.kernel_id, judged.language, source)
            profiled = self._profiled(
                call, problem, judged.kernel_id, judged.device, judged.profile, f"mcp {tool} for {who}"
            )
            await self._append([proposed, profiled])
            return profiled.event_id

    async def compared(
        self,
        who: str,
        problem_ref: str,
        device: str,
        language: str,
        kernels: list[tuple[str, str]],
        profiles: list[tuple[str, Profile]],
    ) -> str:
        """Record a compare: both kernels as proposed, every round's profile of each; the id of
        the call (what an insight on the pair names as its request)."""
        async with self._lock:
            call = self._call()
            problem = problem_ref.rpartition("/")[2]
            events: list[ev.Event] = [
                self._proposed(call, problem, kid, language, src) for kid, src in kernels
            ]
            events += [
                self._profiled(call, problem, kid, device, prof, f"mcp compare_kernels for {who}", i)
                for i, (kid, prof) in enumerate(profiles)
            ]
            await self._append(events)
            return call

    async def insight(
        self, compare_call: str, problem_ref: str, entry: MemoryEntry, who: str, pair_id: str
    ) -> str:
        """Record an insight the agent wrote on a pair this session's judge verified: its
        words (`InsightSummarized`, answering the compare) and the memory entry they make
        (`AgentMemoryEntryAdded`, caused by them); the id of the entry's event."""
        async with self._lock:
            said = ev.InsightSummarized(
                **ev.envelope(ev.InsightSummarized, self.session_id, compare_call, ts=time.time()),
                problem=problem_ref.rpartition("/")[2],
                iteration=0,
                request_id=compare_call,
                title=entry.title,
                text=entry.text,
            )
            added = ev.AgentMemoryEntryAdded(
                **ev.envelope(
                    ev.AgentMemoryEntryAdded, self.session_id, entry.id, ts=time.time(), cause=said
                ),
                entry=entry,
                client=who,
                pair_id=pair_id,
            )
            await self._append([said, added])
            return added.event_id
