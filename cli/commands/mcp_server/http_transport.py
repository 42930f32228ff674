"""`accelopt mcp --http HOST:PORT`: the server on streamable HTTP (at /mcp), for a team.

The token rule: beyond loopback (any address but 127.0.0.0/8, ::1 and localhost) the server
refuses to listen without a bearer token (`$ACCELOPT_MCP_TOKEN`, or the variable --token-env
names: never a command-line argument, which every user of the host can read). With a token,
every request without `Authorization: Bearer <token>` is answered 401 before it reaches the
MCP layer, on loopback too.
"""

from __future__ import annotations

import hmac
import ipaddress
from typing import Any

Scope = dict[str, Any]


class TokenRuleError(ValueError):
    """The server may not listen as asked; one line."""


def parse_listen(text: str) -> tuple[str, int]:
    host, sep, port = text.rpartition(":")
    if not sep or not port.isdigit() or not host:
        raise TokenRuleError(f"--http {text!r}: expected HOST:PORT, e.g. 127.0.0.1:8765")
    host = host.strip("[]")
    if not 0 <= int(port) <= 65535:
        raise TokenRuleError(f"--http {text!r}: port out of range")
    return host, int(port)


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False  # a name that may resolve anywhere


def check_token_rule(host: str, token: str | None, token_env: str) -> None:
    if not is_loopback(host) and not token:
        raise TokenRuleError(
            f"refusing to listen on {host} (beyond loopback) without a bearer token: set ${token_env}"
        )
    if token is not None and len(token) < 16:
        raise TokenRuleError(
            f"${token_env} is too short: use at least 16 characters (e.g. openssl rand -hex 32)"
        )


class BearerToken:
    """ASGI middleware: HTTP requests must carry `Authorization: Bearer <token>` (compared in
    constant time); others get 401 and never reach `app`, nor does any WebSocket."""

    def __init__(self, app: Any, token: str) -> None:
        self.app = app
        self._expected = f"Bearer {token}".encode()

    async def __call__(self, scope: Scope, receive: Any, send: Any) -> None:
        if scope["type"] == "websocket":  # no tool is served there: refused before the app
            await send({"type": "websocket.close", "code": 1008})
            return
        if scope["type"] == "http":
            given = dict(scope.get("headers") or []).get(b"authorization", b"")
            if not hmac.compare_digest(given, self._expected):
                body = b'{"error": "unauthorized: this server needs Authorization: Bearer <token>"}'
                await send(
                    {
                        "type": "http.response.start",
                        "status": 401,
                        "headers": [
                            (b"content-type", b"application/json"),
                            (b"www-authenticate", b'Bearer realm="accelopt"'),
                            (b"content-length", str(len(body)).encode()),
                        ],
                    }
                )
                await send({"type": "http.response.body", "body": body})
                return
        await self.app(scope, receive, send)


async def serve_http(app: Any, host: str, port: int, token: str | None) -> None:
    """Serve `app` (an `AccelOptMCP`) until cancelled."""
    import uvicorn

    server = app.server()
    asgi: Any = server.streamable_http_app(host=host)
    if token:
        asgi = BearerToken(asgi, token)
    config = uvicorn.Config(asgi, host=host, port=port, log_level="warning", lifespan="on")
    try:
        await uvicorn.Server(config).serve()
    finally:
        await app.queue.close()  # the judge's workers, the pool's connection, the queue's record
