"""The dashboard's HTTP side (aiohttp): the page, JSON view models, server-sent events.

Read-only: GET routes only. With a token every request (page, assets, API, event stream)
must carry it, as `?token=`, an `X-AccelOpt-Token` or `Authorization: Bearer` header, or the
cookie the page sets after the first authorized load; none is 401, a wrong one 403. Without a
token (loopback only, see `cli/commands/dashboard.py`) requests must name a loopback
host, so a web page elsewhere cannot read the dashboard through DNS rebinding.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import hmac
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import msgspec
from aiohttp import web

from replay.dashboard import campaign_models, models
from replay.dashboard.hub import Hub, Tracked

STATIC = Path(__file__).with_name("static")
COOKIE = "accelopt_token"
MIN_UPDATE_INTERVAL_S = 0.1  # coalesce bursts of events into one update per page
KEEPALIVE_S = 15.0
LOOPBACK_HOSTS = {"127.0.0.1", "localhost", "::1", "[::1]"}
MAX_COMPARE = 8

HUB: web.AppKey[Hub] = web.AppKey("hub", Hub)
TOKEN: web.AppKey[str] = web.AppKey("token", str)

_encode = msgspec.json.Encoder().encode


def _json(data: bytes, status: int = 200) -> web.Response:
    return web.Response(
        body=data, status=status, content_type="application/json", headers={"Cache-Control": "no-store"}
    )


def _error(status: int, message: str) -> web.Response:
    return _json(_encode({"error": message}), status)


# --- access -----------------------------------------------------------------------------------


def _given_token(request: web.Request) -> str | None:
    auth = request.headers.get("Authorization", "")
    for value in (
        request.query.get("token"),
        request.headers.get("X-AccelOpt-Token"),
        auth[7:] if auth.startswith("Bearer ") else None,
        request.cookies.get(COOKIE),
    ):
        if value:
            return value
    return None


def _hostname(host: str) -> str:
    """The Host header without its port ("[::1]:8765" -> "[::1]")."""
    if host.startswith("["):
        return host[: host.find("]") + 1]
    return host.rsplit(":", 1)[0] if ":" in host else host


@web.middleware
async def access(
    request: web.Request,
    handler: Callable[[web.Request], Awaitable[web.StreamResponse]],
) -> web.StreamResponse:
    token = request.app[TOKEN]
    if not token:
        if _hostname(request.host or "") not in LOOPBACK_HOSTS:
            return web.Response(
                status=403,
                text=f"host {request.host!r} refused: the dashboard serves loopback only "
                "(bind another address with --host and --token)\n",
            )
        return await handler(request)
    given = _given_token(request)
    if given is None:
        return web.Response(
            status=401,
            text="this dashboard needs its token: open it with ?token=...\n",
            headers={"WWW-Authenticate": "Bearer"},
        )
    if not hmac.compare_digest(given.encode(), token.encode()):
        return web.Response(status=403, text="wrong token\n")
    resp = await handler(request)
    if request.query.get("token") and not resp.prepared:
        resp.set_cookie(COOKIE, token, httponly=True, samesite="Strict", path="/")
    return resp


# --- models -----------------------------------------------------------------------------------


def _version(hub: Hub, t: Tracked) -> tuple:
    """What a run's models are built from: its events, the stream, and its driver's lock (a
    driver that dies changes its state without an event)."""
    return (t.source, t.version, hub.streaming, hub.run_driver(t))


def runs_json(hub: Hub) -> tuple[object, bytes]:
    from replay.device_queues import queue_lines, queues_version

    tick = int(time.time() // 30)  # the clock moves "last event ... ago" and "stalled"
    version = (hub.version, hub.streaming, tick, queues_version(hub.root))

    def build() -> bytes:
        now = time.time()
        rows = [
            hub.cached(
                ("row", t.run_id),
                (*_version(hub, t), tick),
                functools.partial(
                    models.run_row,
                    t.view,
                    t.source,
                    streaming=hub.streaming,
                    now=now,
                    driver=hub.run_driver(t),
                    root=str(hub.root),
                ),
            )
            for t in hub.runs()
        ]
        campaigns = [
            hub.cached(
                ("campaign-row", c.campaign_id),
                (c.source, c.version, hub.streaming, tick, state),
                functools.partial(
                    campaign_models.campaign_row, c.view, c.source, state, streaming=hub.streaming, now=now
                ),
            )
            for c in hub.campaigns()
            for state in [hub.campaign_state(c)]
        ]
        return _encode(
            models.RunsModel(
                runs=list(reversed(rows)),
                campaigns=list(reversed(campaigns)),
                stream=hub.stream_url if hub.connected else "",
                root=str(hub.root),
                warnings=sorted(hub.warnings.values()),
                generated_ts=now,
                device_queues=queue_lines(hub.root),
            )
        )

    return version, hub.cached(("runs",), version, build)


Sections = dict[str, bytes]  # a model's fields, each encoded on its own


def _sections(model: msgspec.Struct) -> Sections:
    return {f: _encode(getattr(model, f)) for f in model.__struct_fields__}


def _joined(sections: Sections) -> bytes:
    return b"{" + b",".join(b'"' + k.encode() + b'":' + v for k, v in sections.items()) + b"}"


def run_sections(hub: Hub, run_id: str) -> tuple[object, Sections | None]:
    """The run page's model as encoded sections (built once per version of the run)."""
    t = hub.get(run_id)
    if t is None:
        return None, None
    version = _version(hub, t)
    data = hub.cached(
        ("run", run_id),
        version,
        lambda: _sections(
            models.run_model(
                t.view,
                t.source,
                streaming=hub.streaming,
                memo=t.memo,
                driver=hub.run_driver(t),
                root=str(hub.root),
            )
        ),
    )
    return version, data


def campaign_json(hub: Hub, campaign_id: str) -> tuple[object, bytes | None]:
    t = hub.campaign(campaign_id)
    if t is None:
        return None, None
    state = hub.campaign_state(t)
    version = (t.source, t.version, hub.streaming, state)
    data = hub.cached(
        ("campaign", campaign_id),
        version,
        lambda: _encode(campaign_models.campaign_model(t.view, t.source, state, streaming=hub.streaming)),
    )
    return version, data


def _compare_ids(request: web.Request) -> list[str]:
    ids = [r for r in request.query.get("runs", "").split(",") if r.strip()]
    if len(ids) < 2:
        raise web.HTTPBadRequest(text="compare needs two or more runs: ?runs=RUN1,RUN2\n")
    if len(ids) > MAX_COMPARE:
        raise web.HTTPBadRequest(text=f"compare takes at most {MAX_COMPARE} runs\n")
    return ids


def compare_json(hub: Hub, ids: list[str], report_path: str) -> tuple[object, bytes | None]:
    tracked = [hub.get(r) for r in ids]
    if any(t is None for t in tracked):
        return None, None
    ts = [t for t in tracked if t is not None]
    version = tuple(_version(hub, t) for t in ts)
    data = hub.cached(
        ("compare", *ids),
        version,
        lambda: _encode(
            models.compare_model(
                [t.view for t in ts],
                [t.source for t in ts],
                streaming=hub.streaming,
                report_path=report_path,
                drivers=[hub.run_driver(t) for t in ts],
                root=str(hub.root),
            )
        ),
    )
    return version, data


# --- handlers ---------------------------------------------------------------------------------


async def page(request: web.Request) -> web.StreamResponse:
    return web.FileResponse(STATIC / "index.html", headers={"Cache-Control": "no-store"})


async def report_css(request: web.Request) -> web.Response:
    """The static report's stylesheet (tables, charts, diffs), shared with the page."""
    from replay.render.htmlkit import CSS

    return web.Response(text=CSS, content_type="text/css", headers={"Cache-Control": "no-cache"})


async def api_runs(request: web.Request) -> web.Response:
    return _json(runs_json(request.app[HUB])[1])


async def api_run(request: web.Request) -> web.Response:
    run_id = request.match_info["run_id"]
    _, sections = run_sections(request.app[HUB], run_id)
    return _json(_joined(sections)) if sections is not None else _error(404, f"no run {run_id!r} (yet)")


async def api_campaign(request: web.Request) -> web.Response:
    cid = request.match_info["campaign_id"]
    _, data = campaign_json(request.app[HUB], cid)
    return _json(data) if data is not None else _error(404, f"no campaign {cid!r} (yet)")


async def stream_campaign(request: web.Request) -> web.StreamResponse:
    hub = request.app[HUB]
    cid = request.match_info["campaign_id"]
    return await _sse(request, frozenset({cid}), lambda: campaign_json(hub, cid))


async def campaign_report(request: web.Request) -> web.Response:
    """The static report (`accelopt report CAMPAIGN`) of a campaign the dashboard holds."""
    from replay.render.campaign import build_campaign_report

    t = request.app[HUB].campaign(request.match_info["campaign_id"])
    if t is None:
        return web.Response(status=404, text="unknown campaign\n")
    html = build_campaign_report(t.view, request.app[HUB].campaign_state(t))
    return web.Response(text=html, content_type="text/html", headers={"Cache-Control": "no-store"})


async def api_kernel(request: web.Request) -> web.Response:
    t = request.app[HUB].get(request.match_info["run_id"])
    if t is None:
        return _error(404, f"no run {request.match_info['run_id']!r}")
    k = models.kernel_model(t.view, request.match_info["kernel_id"])
    return (
        _json(_encode(k)) if k is not None else _error(404, f"no kernel {request.match_info['kernel_id']!r}")
    )


def _report_path(request: web.Request, ids: list[str]) -> str:
    return "/report?runs=" + ",".join(ids)


async def api_compare(request: web.Request) -> web.Response:
    ids = _compare_ids(request)
    _, data = compare_json(request.app[HUB], ids, _report_path(request, ids))
    return _json(data) if data is not None else _error(404, "unknown run among " + ", ".join(ids))


async def report(request: web.Request) -> web.Response:
    """The static report (`accelopt report RUN ...`) of runs the dashboard holds."""
    from replay.render.report import build_report
    from replay.summary import summarize

    hub = request.app[HUB]
    ids = [r for r in request.query.get("runs", "").split(",") if r.strip()][:MAX_COMPARE]
    tracked = [hub.get(r) for r in ids]
    if not ids or any(t is None for t in tracked):
        return web.Response(status=404, text="unknown run(s): " + ", ".join(ids) + "\n")
    ts = [t for t in tracked if t is not None]
    states = [
        models.RunListing(summarize(t.view), t.source, driver=hub.run_driver(t), root=str(hub.root)).state()
        for t in ts
    ]
    html = build_report([t.view for t in ts], states=states)
    return web.Response(text=html, content_type="text/html", headers={"Cache-Control": "no-store"})


async def _sse(
    request: web.Request,
    run_ids: frozenset[str] | None,
    build: Callable[[], tuple[object, bytes | Sections | None]],
) -> web.StreamResponse:
    """Send `build()`'s model now and again whenever a watched run changes (at most one
    update per MIN_UPDATE_INTERVAL_S); `event: missing` while the run is not known yet.

    A model given as sections is sent whole first, then as patches holding only the
    sections that changed since the last message (the page merges them): on a long run
    most of the model (charts, lineage, memory) changes rarely, and the page then parses
    and redraws only what did."""
    hub = request.app[HUB]
    resp = web.StreamResponse(
        headers={"Content-Type": "text/event-stream", "Cache-Control": "no-store", "X-Accel-Buffering": "no"}
    )
    await resp.prepare(request)
    watch = hub.watch(run_ids)
    last: object = ()
    sent_sections: Sections = {}
    try:
        while True:
            watch.changed.clear()
            version, data = build()
            if data is None:
                if last is not None:
                    await resp.write(b"event: missing\ndata: {}\n\n")
                    last, sent_sections = None, {}
            elif version != last:
                if isinstance(data, dict):
                    patch = {k: v for k, v in data.items() if sent_sections.get(k) != v}
                    sent_sections = data
                    data = _joined(patch)
                await resp.write(b"data: " + data + b"\n\n")
                last = version
            sent = time.monotonic()
            try:
                await asyncio.wait_for(watch.changed.wait(), timeout=KEEPALIVE_S)
            except TimeoutError:
                await resp.write(b": keepalive\n\n")
                continue
            await asyncio.sleep(max(0.0, MIN_UPDATE_INTERVAL_S - (time.monotonic() - sent)))
    except ConnectionResetError:  # the page went away
        pass
    finally:
        hub.unwatch(watch)
    return resp


async def stream_runs(request: web.Request) -> web.StreamResponse:
    hub = request.app[HUB]
    return await _sse(request, None, lambda: runs_json(hub))


async def stream_run(request: web.Request) -> web.StreamResponse:
    hub = request.app[HUB]
    run_id = request.match_info["run_id"]
    return await _sse(request, frozenset({run_id}), lambda: run_sections(hub, run_id))


async def stream_compare(request: web.Request) -> web.StreamResponse:
    hub = request.app[HUB]
    ids = _compare_ids(request)
    path = _report_path(request, ids)
    return await _sse(request, frozenset(ids), lambda: compare_json(hub, ids, path))


# --- the app ----------------------------------------------------------------------------------


def make_app(hub: Hub, *, token: str = "") -> web.Application:
    app = web.Application(middlewares=[access])
    app[HUB] = hub
    app[TOKEN] = token
    r = app.router
    for path in ("/", "/run/{run_id}", "/compare", "/campaign/{campaign_id}"):
        r.add_get(path, page)
    r.add_get("/api/campaign/{campaign_id}", api_campaign)
    r.add_get("/api/campaign/{campaign_id}/stream", stream_campaign)
    r.add_get("/campaign-report/{campaign_id}", campaign_report)
    r.add_get("/api/runs", api_runs)
    r.add_get("/api/runs/stream", stream_runs)
    r.add_get("/api/run/{run_id}", api_run)
    r.add_get("/api/run/{run_id}/stream", stream_run)
    r.add_get("/api/run/{run_id}/kernel/{kernel_id}", api_kernel)
    r.add_get("/api/compare", api_compare)
    r.add_get("/api/compare/stream", stream_compare)
    r.add_get("/report", report)
    r.add_get("/assets/report.css", report_css)
    r.add_static("/static/", STATIC, append_version=False)

    async def on_startup(_: web.Application) -> None:
        await hub.start()

    async def on_cleanup(_: web.Application) -> None:
        await hub.stop()

    app.on_startup.append(on_startup)
    app.on_cleanup.append(on_cleanup)
    return app


class DashboardServer:
    """The dashboard on its own event loop (CLI, tests and benchmarks): `start()` returns
    once it listens; `url` is where."""

    def __init__(
        self,
        root: str | Path,
        *,
        nats_url: str | None = None,
        host: str = "127.0.0.1",
        port: int = 8765,
        token: str = "",
        scan_interval_s: float = 2.0,
    ) -> None:
        self.hub = Hub(root, nats_url, scan_interval_s=scan_interval_s)
        self.app = make_app(self.hub, token=token)
        self.host, self.port, self.token = host, port, token
        self._runner: web.AppRunner | None = None

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"

    async def start(self) -> None:
        self._runner = web.AppRunner(self.app, handle_signals=False, shutdown_timeout=1.0)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.host, self.port)
        await site.start()
        if self.port == 0:
            sock = site._server.sockets[0]  # type: ignore[union-attr]
            self.port = sock.getsockname()[1]

    async def stop(self) -> None:
        if self._runner is not None:
            with contextlib.suppress(Exception):
                await self._runner.cleanup()
            self._runner = None
