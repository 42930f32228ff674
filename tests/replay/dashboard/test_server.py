"""The dashboard's server without a browser: view models against the fold, the compare page
against `accelopt report`, a kernel's diff, live updates over server-sent events from a real
nats-server, access rules, and the CLI's refusals. Runs are synthetic logs
(`replay.synthetic`: the real coordinator core in a simulated world)."""

from __future__ import annotations

import asyncio
import json
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from html.parser import HTMLParser
from pathlib import Path

import msgspec
import pytest

from cli.main import main as cli_main
from events.logfile import write_events
from replay.dashboard.browser import ServerThread
from replay.dashboard.models import RunModel, failure_reason, kernel_model, run_model
from replay.fold import RunView
from replay.render import fmt
from replay.render.report import build_report
from replay.summary import summarize


def get(url: str, headers: dict[str, str] | None = None) -> tuple[int, bytes, dict[str, str]]:
    req = urllib.request.Request(url, headers=headers or {})
    try:
        with urllib.request.urlopen(req, timeout=20) as r:
            return r.status, r.read(), dict(r.headers)
    except urllib.error.HTTPError as e:
        return e.code, e.read(), dict(e.headers)


def get_json(url: str) -> dict:
    status, body, _ = get(url)
    assert status == 200, body
    return json.loads(body)


@pytest.fixture(scope="module")
def two_runs(synthetic, export_log, tmp_path_factory):
    root = tmp_path_factory.mktemp("dash-files") / "runs"
    # seed 3: a run whose proposals include kernels that do not compile and fixes that pass
    a = synthetic(run_id="run-a", problems=2, overrides=("search.iterations=3",), seed=3)
    b = synthetic(
        run_id="run-b", problems=2, overrides=("search.iterations=3", "search.beam_width=3"), seed=2
    )
    for events in (a, b):
        export_log(events, root / events[0].run_id / "log.aolog")
    with ServerThread(root) as server:
        yield server, RunView.from_events(a), RunView.from_events(b)


class Cells(HTMLParser):
    """The cell texts of every table row of one class."""

    def __init__(self, table_class: str) -> None:
        super().__init__()
        self.cls, self.depth, self.rows, self.cell = table_class, 0, [], None

    def handle_starttag(self, tag: str, attrs: list) -> None:
        a = dict(attrs)
        if tag == "table" and self.cls in (a.get("class") or "").split():
            self.depth = 1
        elif self.depth and tag == "tr":
            self.rows.append([])
        elif self.depth and tag in ("td", "th"):
            self.cell = ""

    def handle_endtag(self, tag: str) -> None:
        if tag == "table":
            self.depth = 0
        elif self.depth and tag in ("td", "th") and self.cell is not None:
            self.rows[-1].append(self.cell.strip())
            self.cell = None

    def handle_data(self, data: str) -> None:
        if self.cell is not None:
            self.cell += data


def test_runs_and_run_models_are_the_fold(two_runs):
    server, a, b = two_runs
    runs = get_json(f"{server.url}/api/runs")
    assert runs["stream"] == "" and not runs["warnings"]
    rows = {r["run_id"]: r for r in runs["runs"]}
    assert set(rows) == {"run-a", "run-b"}
    for view in (a, b):
        s, row = summarize(view), rows[view.run_id]
        assert (row["status"], row["source"], row["live"]) == ("completed", "file", False)
        assert row["iterations"] == s.iterations == "3/3" and row["kernels"] == s.kernels
        assert row["pct_peak_text"] == fmt.pct(s.pct_peak_geomean) and row["speedup"] == pytest.approx(
            s.speedup_geomean
        )
        assert row["cost_text"] == fmt.usd(s.cost_usd) and row["budget_usd"] == 50.0
        assert row["spend_fraction"] == pytest.approx(s.cost_usd / 50.0)
    m = get_json(f"{server.url}/api/run/run-a")
    for p, r in zip(m["problems"], a.results(), strict=True):
        assert (p["problem"], p["best_text"], p["speedup_text"], p["kernels"]) == (
            r.problem,
            fmt.ms(r.best_ms),
            fmt.speedup(r.speedup),
            r.kernels,
        )
    usage = {u["role"]: u for u in m["llm"]}
    assert {r: (u["calls"], u["prompt_tokens"]) for r, u in usage.items()} == {
        r: (u.calls, u.prompt_tokens) for r, u in a.usage.items()
    }
    for beam in m["beams"]:
        p = a.problems[beam["problem"]]
        assert (
            beam["iteration"] == max(p.beams)
            and [x["kernel_id"] for x in beam["members"]] == p.beams[max(p.beams)]
        )
    for block in m["lineage"]:
        path = [k.kernel_id for k in a.lineage(a.problems[block["problem"]].best_id)]
        assert [s["kernel_id"] for s in block["steps"]] == path and block["steps"][0]["kind"] == "baseline"
    assert m["insights_total"] == len(a.memory_entries) and m["retrievals"]
    assert status_of(f"{server.url}/api/run/nope") == 404


def status_of(url: str) -> int:
    return get(url)[0]


def test_failures_are_grouped_by_reason(two_runs):
    _, a, _ = two_runs
    k = run_model(a, "file", streaming=False).kernels
    failed = [x for x in a.kernels.values() if x.status not in ("passed", "pending")]
    assert failed, "the synthetic run has kernels that do not compile"
    assert sum(g.count for g in k.failures) == len(failed)
    # the same compiler error at different positions is one group
    assert any("kernel.c:N:N: error" in g.reason for g in k.failures)
    assert all(failure_reason(a.kernels[i]) == g.reason for g in k.failures for i in g.kernel_ids)
    assert sum(sum(c.values()) for c in k.counts.values()) == len(a.kernels) == k.total


def test_compare_has_the_report_figures(two_runs):
    server, a, b = two_runs
    m = get_json(f"{server.url}/api/compare?runs=run-a,run-b")
    assert m["labels"] == ["run-a", "run-b"] and m["report_path"] == "/report?runs=run-a,run-b"
    status, html, _ = get(server.url + m["report_path"])
    assert status == 200 and html.decode().startswith("<!DOCTYPE html>")
    parser = Cells("comparison")
    parser.feed(build_report([a, b]))
    report_rows = {r[0]: r[1:] for r in parser.rows[1:]}
    for p in m["problems"]:
        mine = [x for pair in zip(p["best_pct_text"], p["speedup_text"], strict=True) for x in pair]
        mine += [x for pair in zip(p["pct_ratio_text"], p["speedup_ratio_text"], strict=True) for x in pair]
        assert mine == report_rows[p["problem"]]
    assert ["search.beam_width", ["2", "3"]] in m["config_differences"]
    assert status_of(f"{server.url}/api/compare?runs=run-a") == 400
    assert status_of(f"{server.url}/api/compare?runs=run-a,ghost") == 404


def test_kernel_shows_its_diff(two_runs):
    server, a, _ = two_runs
    fix = next(k for k in a.kernels.values() if k.fix_of and k.passed)
    m = get_json(f"{server.url}/api/run/run-a/kernel/{fix.kernel_id}")
    assert m["previous_id"] == fix.fix_of and m["kind"] == "fix" and m["source"] == fix.source
    assert '<pre class="diff">' in m["diff_html"] and (m["added"], m["removed"]) == (1, 1)
    assert m == json.loads(msgspec.json.encode(kernel_model(a, fix.kernel_id)))
    base = a.problems["op00"].baseline_id
    assert get_json(f"{server.url}/api/run/run-a/kernel/{base}")["diff_html"] == ""
    assert status_of(f"{server.url}/api/run/run-a/kernel/nope") == 404


def test_access_rules(tmp_path):
    token = "s3cret-token-123"
    with ServerThread(tmp_path, token=token) as server:
        url = server.url
        assert status_of(f"{url}/") == 401
        assert status_of(f"{url}/api/runs?token=wrong") == 403
        assert status_of(f"{url}/api/runs") == 401
        status, _, headers = get(f"{url}/?token={token}")
        assert status == 200 and f"accelopt_token={token}" in headers.get("Set-Cookie", "")
        assert status_of_h(f"{url}/api/runs", {"Cookie": f"accelopt_token={token}"}) == 200
        assert status_of_h(f"{url}/api/runs", {"X-AccelOpt-Token": token}) == 200
        assert status_of_h(f"{url}/api/runs", {"Authorization": f"Bearer {token}x"}) == 403
        req = urllib.request.Request(f"{url}/api/runs?token={token}", data=b"{}", method="POST")
        with pytest.raises(urllib.error.HTTPError) as e:
            urllib.request.urlopen(req, timeout=10)
        assert e.value.code == 405  # read-only
    with ServerThread(tmp_path) as server:  # no token: loopback names only
        assert status_of(f"{server.url}/api/runs") == 200
        assert status_of_h(f"{server.url}/api/runs", {"Host": "attacker.example:8765"}) == 403


def status_of_h(url: str, headers: dict[str, str]) -> int:
    return get(url, headers)[0]


def test_cli_refuses_a_public_address_without_token(capsys):
    assert cli_main(["dashboard", "--host", "0.0.0.0"]) == 2
    assert "--token" in capsys.readouterr().err
    assert cli_main(["dashboard", "--host", "192.168.1.5", "--token", "short"]) == 2
    assert "8 characters" in capsys.readouterr().err
    assert cli_main(["dashboard", "--port", "70000"]) == 2


async def _sse_models(url: str, out: asyncio.Queue, timeout: float = 60.0) -> None:
    """Put every model an event stream sends on `out` (None: the run is not known yet)."""
    import aiohttp

    async with aiohttp.ClientSession() as s, s.get(url, timeout=aiohttp.ClientTimeout(total=timeout)) as r:
        assert r.status == 200 and r.headers["Content-Type"].startswith("text/event-stream")
        event = "message"
        async for raw in r.content:
            line = raw.decode().rstrip("\n")
            if line.startswith("event: "):
                event = line[7:]
            elif line.startswith("data: "):
                await out.put(json.loads(line[6:]) if event == "message" else None)
                event = "message"


def test_live_updates_from_the_stream(nats_server, synthetic, tmp_path):
    from events.log import EventLog

    # stamped now: a running run whose last event is old is shown as stalled, not live
    events = synthetic(run_id="live-1", problems=1, overrides=("search.iterations=2",), t0=time.time())
    half = len(events) // 2

    async def publish(batch: list) -> None:
        elog = await EventLog.connect(nats_server.url)
        try:
            await elog.publish_many(batch)
        finally:
            await elog.close()

    async def scenario(url: str) -> list[dict | None]:
        got: asyncio.Queue = asyncio.Queue()
        reader = asyncio.create_task(_sse_models(f"{url}/api/run/live-1/stream", got))
        models: list[dict | None] = []

        async def until(n: int) -> None:  # models until one counts n events
            while not (models and models[-1] is not None and models[-1]["run"]["events"] >= n):
                models.append(await asyncio.wait_for(got.get(), 60))

        models.append(await asyncio.wait_for(got.get(), 60))  # the page is open before the run exists
        await publish(events[:half])
        await until(half)
        await publish(events[half:])
        await until(len(events))
        reader.cancel()
        return models

    with ServerThread(tmp_path / "runs", nats_url=nats_server.url, scan_interval_s=0.5) as server:
        models = asyncio.run(scenario(server.url))
        runs = get_json(f"{server.url}/api/runs")
        full = get_json(f"{server.url}/api/run/live-1")
    assert models[0] is None, "the run was announced as missing before it existed"
    # the first model is whole; later ones carry only the sections that changed
    assert set(models[1]) == {f.name for f in msgspec.structs.fields(RunModel)}
    merged: dict = {}
    for m in models[1:]:
        merged |= m
    assert merged | {"generated_ts": 0} == full | {"generated_ts": 0}, "the patches add up to the model"
    shown = [m["run"]["events"] for m in models if m is not None]
    assert shown == sorted(shown) and shown[-1] == len(events)
    assert half in shown, "no update between the two halves"
    final = models[-1]
    view = RunView.from_events(events)
    assert final["run"]["status"] == "completed" and final["run"]["source"] == "stream"
    assert final["run"]["pct_peak_text"] == fmt.pct(summarize(view).pct_peak_geomean)
    assert any(m is not None and m["run"]["live"] and m["run"]["status"] == "running" for m in models)
    assert runs["stream"] == nats_server.url and [r["run_id"] for r in runs["runs"]] == ["live-1"]


def test_assets_ship_in_the_package():
    import replay.dashboard.server as server

    names = {p.name for p in Path(server.STATIC).iterdir()}
    assert {"index.html", "app.js", "app.css", "favicon.svg"} <= names
    html = (Path(server.STATIC) / "index.html").read_text()
    assert "http://" not in html and "https://" not in html  # nothing fetched from elsewhere
    js = (Path(server.STATIC) / "app.js").read_text()
    assert "http://" not in js and "https://" not in js


def test_follows_the_roots_embedded_server_while_it_is_up(synthetic, tmp_path):
    """Without --nats: the root's embedded server is found when a run starts one, and let go
    when it stops; the run stays on the page."""
    from events.log import EventLog
    from events.runsource import open_log_endpoint

    root = tmp_path / "runs"
    events = synthetic(run_id="embedded-1", problems=1, overrides=("search.iterations=1",), t0=time.time())

    async def publish(url: str) -> None:
        elog = await EventLog.connect(url)
        try:
            await elog.publish_many(events)
        finally:
            await elog.close()

    def wait_for(cond: Callable[[dict], bool], what: str, timeout: float = 30.0) -> dict:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            runs = get_json(f"{server.url}/api/runs")
            if cond(runs):
                return runs
            time.sleep(0.2)
        raise AssertionError(f"{what}: {runs}")

    with ServerThread(root, scan_interval_s=0.3) as server:
        assert get_json(f"{server.url}/api/runs")["stream"] == ""
        endpoint = open_log_endpoint(None, root)  # what `accelopt run` does: a server under <root>/.nats
        try:
            assert endpoint.server is not None
            asyncio.run(publish(endpoint.url))
            runs = wait_for(
                lambda r: r["runs"] and r["runs"][0]["events"] == len(events), "the run never showed"
            )
            assert runs["stream"] == endpoint.url and runs["runs"][0]["source"] == "stream"
        finally:
            endpoint.close()
        runs = wait_for(lambda r: r["stream"] == "", "the stopped server was not let go")
        assert [(r["run_id"], r["status"], r["events"]) for r in runs["runs"]] == [
            ("embedded-1", "completed", len(events))
        ]
        # the row says where it comes from now: the stream as last read (the subtitle says no
        # stream is followed), then the exported log once there is one
        assert runs["runs"][0]["source"] == "stream (stopped)"
        write_events(root / "embedded-1" / "log.aolog", events)
        runs = wait_for(lambda r: r["runs"][0]["source"] == "file", "the exported log was not used")
        assert runs["runs"][0]["events"] == len(events)


def test_a_model_kept_up_to_date_equals_one_built_afresh(synthetic):
    """The parts a run's model keeps between updates (kernel tally, charts, lineage,
    retrievals) never drift from the fold: after every event, same model as from scratch."""
    from replay.dashboard.models import Memo

    events = synthetic(run_id="memo", problems=2, overrides=("search.iterations=3",), seed=3)
    view, memo = RunView(), Memo()
    strip = lambda m: msgspec.json.decode(msgspec.json.encode(m)) | {"generated_ts": 0}  # noqa: E731
    for i, e in enumerate(events):
        view.apply(e)
        kept = run_model(view, "stream", streaming=True, now=1.0, memo=memo)
        if i % 7 == 0 or i == len(events) - 1:
            assert strip(kept) == strip(run_model(view, "stream", streaming=True, now=1.0)), (
                f"after event {i}"
            )
    assert kept.kernels.failures and kept.run.status == "completed"
