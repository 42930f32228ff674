"""One tool of the server: its name, its description, the Structs of its arguments and of its
structured result (its JSON schemas, `records.py`) and its handler, which answers with the
result and a one-line summary (`server.py` turns them into the MCP answer)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import msgspec
from mcp.server import ServerRequestContext

Ctx = ServerRequestContext[Any, Any]


@dataclass(frozen=True)
class ToolSpec:
    name: str
    description: str
    args: type[msgspec.Struct]
    result: type[msgspec.Struct]
    handler: Callable[[Ctx, Any], Awaitable[tuple[msgspec.Struct, str]]]
