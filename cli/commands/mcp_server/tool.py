"""One tool of the server: its name, its description, the Structs of its arguments and of its
structured result (its JSON schemas, `records.py`) and its handler, which answers with the
result and a one-line summary (`server.py` turns them into the MCP answer); and what a handler
knows of its caller (who asked, in which session, where its progress goes)."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import msgspec
from mcp.server import ServerRequestContext

Ctx = ServerRequestContext[Any, Any]
log = logging.getLogger("accelopt.mcp")


@dataclass(frozen=True)
class ToolSpec:
    name: str
    description: str
    args: type[msgspec.Struct]
    result: type[msgspec.Struct]
    handler: Callable[[Ctx, Any], Awaitable[tuple[msgspec.Struct, str]]]


class ToolError(Exception):
    """What the agent is told when a tool cannot answer: one line."""


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


def progress(ctx: Ctx) -> Callable[[float, float, str], Awaitable[None]]:
    """The caller's progress notifications, for a long judge call."""

    async def report(done: float, total: float, message: str) -> None:
        try:
            await ctx.session.report_progress(round(done, 1), total, message)
        except Exception:  # a client gone mid-profile: the profile's fate is the caller's cancel
            log.debug("progress not delivered", exc_info=True)

    return report


def first_line(text: str) -> str:
    return next((ln.strip() for ln in text.splitlines() if ln.strip()), "")
