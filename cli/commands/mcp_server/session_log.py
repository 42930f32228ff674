"""An agent session's log, in the shape of a run's: `<root>/<session id>/log.aolog`, the
exported-log format every reader takes (`accelopt runs`, `report`, `replay --verify`, the
dashboard). It opens with a `RunStarted` (no targets: the agent, not a coordinator, decides
what to try) and holds, per kernel the judge judged, the kernel as the agent proposed it
(`KernelProposed`, its `request_id` the tool call's) and the verdict (`KernelProfiled`, its
`worker` saying who asked through which tool). Nothing in it is a coordinator's decision, so
a replay re-derives none and verifies every event as an input.

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
from events.logfile import write_events
from replay.runstate import RunLock

if TYPE_CHECKING:
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

    async def judged(self, who: str, tool: str, problem_ref: str, source: str, judged: JudgedKernel) -> str:
        """Record one verdict; the id of its event."""
        async with self._lock:
            self._calls += 1
            call = ev.derive_event_id(self.session_id, "AgentCall", self._calls)
            now = time.time()
            problem = problem_ref.rpartition("/")[2]
            proposed = ev.KernelProposed(
                **ev.envelope(ev.KernelProposed, self.session_id, call, ts=now),
                kernel_id=judged.kernel_id,
                problem=problem,
                iteration=0,
                parent_id=None,
                plan_id=None,
                request_id=call,
                language=judged.language,
                source=source,
            )
            profiled = ev.KernelProfiled(
                **ev.envelope(ev.KernelProfiled, self.session_id, call, ts=time.time(), cause=proposed),
                kernel_id=judged.kernel_id,
                problem=problem,
                device=judged.device,
                request_id=call,
                profile=judged.profile,
                worker=f"mcp {tool} for {who}",
            )
            self.events += [proposed, profiled]
            await asyncio.to_thread(self._write)
            return profiled.event_id
