"""`accelopt runs`: exported runs under the root plus runs only on the root's event stream
(running, or stalled after a crash) while its server is up; never starts a server itself."""

from __future__ import annotations

import asyncio
import json
import shutil
import time

import pytest

from cli.main import main
from events.log import EventLog
from events.runsource import open_log_endpoint, running_server_url
from replay.fold import RunView
from replay.render import fmt
from replay.summary import summarize


async def _publish(url, events):
    elog = await EventLog.connect(url)
    try:
        await elog.publish_many(events)
    finally:
        await elog.close()


@pytest.fixture
def root(tmp_path, real_run, synthetic, export_log):
    root = tmp_path / "runs"
    shutil.copytree(real_run.run_dir, root / real_run.run_id)
    done = synthetic(run_id="synth-done", problems=2, t0=time.time() - 3 * 86400)
    export_log(done, root / "synth-done" / "log.aolog")
    cut = synthetic(run_id="synth-cut", problems=1, t0=time.time() - 2 * 86400, max_events=50)
    export_log(cut, root / "synth-cut" / "log.aolog")
    return root


def _json_rows(capsys, *argv):
    capsys.readouterr()
    assert main(["runs", *argv, "--json"]) == 0
    return {r["run_id"]: r for r in map(json.loads, capsys.readouterr().out.splitlines())}


def test_lists_exported_runs_with_headline_figures(root, real_run, capsys):
    rows = _json_rows(capsys, "--root", str(root))
    assert list(rows) == ["synth-done", "synth-cut", real_run.run_id]  # oldest first
    assert rows["synth-cut"]["status"] == "incomplete" and rows["synth-done"]["status"] == "completed"
    real = summarize(real_run.view)
    r = rows[real_run.run_id]
    assert (r["status"], r["source"], r["problems"], r["iterations_done"]) == ("completed", "file", 1, 2)
    assert r["speedup_geomean"] == pytest.approx(real.speedup_geomean)
    assert r["pct_peak_geomean"] == pytest.approx(real.pct_peak_geomean)
    assert rows["synth-done"]["cost_usd"] > 0
    # the table shows the same figures
    assert main(["runs", "--root", str(root)]) == 0
    out = capsys.readouterr().out
    line = next(x for x in out.splitlines() if real_run.run_id in x)
    for figure in (
        "completed",
        "2/2",
        fmt.speedup(real.speedup_geomean),
        fmt.pct(real.pct_peak_geomean),
        "file",
    ):
        assert figure in line
    assert running_server_url(root) is None and not (root / ".nats").exists(), "listing started no server"


def test_runs_only_on_the_stream(root, real_run, synthetic, capsys, tmp_path, monkeypatch, parse_html):
    now = time.time()
    live = synthetic(run_id="live-run", problems=1, t0=now - 20, max_events=60)
    crashed = synthetic(run_id="crashed-run", problems=1, t0=now - 7200, max_events=40)
    endpoint = open_log_endpoint(None, root)
    try:
        asyncio.run(_publish(endpoint.url, live + crashed))
        rows = _json_rows(capsys, "--root", str(root))
        assert set(rows) == {"synth-done", "synth-cut", real_run.run_id, "live-run", "crashed-run"}
        assert rows["live-run"]["source"] == "stream" and rows["live-run"]["status"] == "running"
        assert rows["crashed-run"]["status"].startswith("stalled (last event 1h")
        assert rows[real_run.run_id]["source"] == "file"
        # a report of a run that only exists on the stream
        monkeypatch.chdir(tmp_path)
        assert main(["report", "live-run", "--root", str(root)]) == 0
        doc = parse_html((tmp_path / "report-live-run.html").read_text())
        view = RunView.from_events(live)
        assert doc.find("table", cls="runs").rows()[1][:2] == ["live-run", "running"]
        assert len(doc.find("ul", cls="tree").find_all("li")) == len(view.kernels)
    finally:
        endpoint.close()
    rows = _json_rows(capsys, "--root", str(root))
    assert set(rows) == {"synth-done", "synth-cut", real_run.run_id}
