"""The bearer-token guard lets through to the server only HTTP requests that carry the token
(and the lifespan): a WebSocket connection, which carries no such check of its own, never
reaches the MCP app, token or not. The app here is the real server's ASGI app."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from cli.commands.mcp_server import build
from cli.commands.mcp_server.http_transport import BearerToken

TOKEN = "t" * 32


def test_a_websocket_never_reaches_the_app(tmp_path: Path) -> None:
    app = build(str(tmp_path / "runs"), str(tmp_path / "memory"))
    reached: list[str] = []
    inner = app.server().streamable_http_app(host="127.0.0.1")

    async def spy(scope: Any, receive: Any, send: Any) -> None:
        reached.append(scope["type"])
        await inner(scope, receive, send)

    sent: list[dict] = []

    async def receive() -> dict:
        return {"type": "websocket.connect"}

    async def send(msg: dict) -> None:
        sent.append(msg)

    scope = {
        "type": "websocket",
        "path": "/mcp",
        "raw_path": b"/mcp",
        "headers": [(b"authorization", f"Bearer {TOKEN}".encode())],
        "query_string": b"",
        "root_path": "",
        "scheme": "ws",
        "server": ("127.0.0.1", 8765),
        "client": ("127.0.0.1", 5000),
        "subprotocols": [],
    }
    try:
        asyncio.run(BearerToken(spy, TOKEN)(scope, receive, send))
    finally:
        asyncio.run(app.judge.close())
    assert reached == []
    assert sent and sent[0]["type"] == "websocket.close"
