"""The MCP server's device queue: every profile and compare of every client goes through the
admission decider (`accelopt/device_queue.py`: one at a time per device, round robin between
sessions, each session's limits), then to whoever profiles for that device: the profilers of
the warm pool of `accelopt up` on the server's root where one runs and can serve it
(`pool_profiles.py`; runs, campaigns and agent sessions then share its queue on the stream),
else the server's own judge (`judge.py`).

A session is a client: its MCP session and the name it gives (`tool.client_session`),
shown as the client's name and a short hash of the rest. The queue's state is written to
`<root>/.device_queue.<server session>.json` on every change (`accelopt campaign status` and
the dashboard show it) and removed when the server ends.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import secrets
import time
from pathlib import Path
from typing import Any

import msgspec

from accelopt.device_queue import (
    Decision,
    DeviceQueue,
    Limits,
    QueueRecord,
    Refuse,
    Start,
    queue_record_path,
)
from cli.commands.mcp_server.judge import Judge, JudgeError, Progress
from cli.commands.mcp_server.pool_profiles import PoolProfiles

log = logging.getLogger("accelopt.mcp")
EMBEDDED = "this server's judge"


class QueueRefused(JudgeError):
    """A session's limit said no: one line, a tool error."""


class SharedQueue:
    def __init__(
        self,
        judge: Judge,
        *,
        root: str | Path,
        server: str,
        limits: Limits | None = None,
        pool: PoolProfiles | None = None,
    ) -> None:
        self.judge = judge
        self.pool = pool
        self.decider = DeviceQueue(limits)
        self.server = server
        self.path = queue_record_path(root, server)
        self._turns: dict[str, asyncio.Future[None]] = {}
        self._backends: dict[str, str] = {}
        self._said: set[str] = set()  # why a pool was passed over, said once each
        self._write()

    async def request(
        self, session: str, device: str, req: dict[str, Any], *, limit_s: float, progress: Progress | None
    ) -> dict[str, Any]:
        """`req` (a profile or a compare) on `device` for `session` once its turn comes; its
        reply. QueueRefused where the session's limits say no."""
        rid = secrets.token_hex(8)
        turn = self._turns[rid] = asyncio.get_running_loop().create_future()
        self._apply(self.decider.submit(rid, session, device))
        try:
            while not turn.done():
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(asyncio.shield(turn), timeout=1.0)
                if not turn.done() and progress is not None:
                    n = self.decider.ahead(rid)
                    await progress(
                        0.0, limit_s, f"{req['problem']}: waiting for the {device} device, {n} ahead"
                    )
            turn.result()  # QueueRefused: its limits said no, now or when its turn came
        except BaseException:
            self._turns.pop(rid, None)
            if not (turn.done() and turn.exception() is not None):
                self._apply(self.decider.cancel(rid))  # cancelled waiting: its place (or slot) freed
            raise
        t0 = time.monotonic()
        try:
            return await self._run(device, req, limit_s, progress)
        finally:
            self._turns.pop(rid, None)
            self._apply(self.decider.finish(rid, time.monotonic() - t0))

    async def _run(
        self, device: str, req: dict[str, Any], limit_s: float, progress: Progress | None
    ) -> dict[str, Any]:
        pool = self._pool_for(device)
        if pool is None:
            self._backend(device, EMBEDDED)
            return await self.judge.request(device, req, limit_s=limit_s, progress=progress)
        assert self.pool is not None
        self._backend(device, f"the pool of accelopt up (pid {pool.pid})")
        return await self.pool.request(pool, device, req, limit_s=limit_s, progress=progress)

    def _pool_for(self, device: str) -> Any:
        if self.pool is None:
            return None
        pool, why = self.pool.pool_for(device)
        if why is not None and why not in self._said:
            self._said.add(why)
            log.warning(
                "the pool of accelopt up cannot profile %s for this server (%s): its judge does", device, why
            )
        return pool

    def _backend(self, device: str, who: str) -> None:
        if self._backends.get(device) != who:
            self._backends[device] = who
            self._write()

    def _apply(self, decisions: list[Decision]) -> None:
        for d in decisions:
            turn = self._turns.get(d.request_id)
            if turn is None or turn.done():
                continue
            if isinstance(d, Start):
                turn.set_result(None)
            elif isinstance(d, Refuse):
                turn.set_exception(QueueRefused(d.reason))
        self._write()

    def _write(self) -> None:
        record = QueueRecord(
            server=self.server,
            pid=os.getpid(),
            updated_at=time.time(),
            backends=dict(self._backends),
            state=self.decider.snapshot(),
        )
        tmp = self.path.with_suffix(".tmp")
        tmp.write_bytes(msgspec.json.encode(record))
        tmp.replace(self.path)

    async def close(self) -> None:
        """The judge's workers stopped, the pool's connection closed, the record removed."""
        await self.judge.close()
        if self.pool is not None:
            await self.pool.close()
        with contextlib.suppress(FileNotFoundError):
            self.path.unlink()


def session_label(who: str, key: str) -> str:
    """A session as the queue names it: the client's name and a short hash of its session key
    (the `mcp-session-id` in it stays with the server)."""
    import hashlib

    return f"{who} #{hashlib.sha256(key.encode()).hexdigest()[:6]}"
