"""One vocabulary of states (replay/states.py): `accelopt runs`, `accelopt campaign status` and
the dashboard's models say the same state, label and resume command for the same logs and
locks.

The root holds an interrupted campaign, as a `kill -9` of its driver leaves it: its log
(the real scheduler core fed the inputs a driver publishes, tests/shared/campaign_log.py),
one run that completed, one its deadline stopped (the run's own driver let it go as its time
was up, and the campaign's driver recorded it: both through the functions they call), one
its campaign's driver could not drive (recorded as an error), and two under way when a
process holding the campaign's lock and theirs was killed with SIGKILL.
Beside it, two runs of their own: one whose `--timeout` stopped it and one whose driver was
killed. Each run has a real synthetic log (replay/synthetic.py), cut where it has no end."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest
from campaign_log import CID, Log, finished, started

from cli.main import main
from events.logfile import write_events
from replay.dashboard.browser import ServerThread
from replay.runstate import RunLock, read_lock
from replay.states import record_campaign_run, time_up
from replay.synthetic import synthetic_run

ALONE_STOPPED, ALONE_KILLED = "alone-stopped", "alone-killed"


def _killed_holding(locks: list[str]) -> None:
    """A process that takes `locks` (Python expressions making RunLocks), says so, and is
    killed with SIGKILL while it holds them."""
    code = "from replay.runstate import RunLock\nimport time\n"
    code += "".join(f"RunLock.{expr}.__enter__()\n" for expr in locks)
    code += "print('locked', flush=True)\ntime.sleep(120)\n"
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stdout.readline().strip() == "locked"
    proc.send_signal(signal.SIGKILL)
    proc.wait()


@pytest.fixture(scope="module")
def place(tmp_path_factory) -> tuple[Path, dict[str, str]]:
    """The root, and the campaign's runs by what became of them."""
    root = tmp_path_factory.mktemp("states") / "runs"
    log = Log()
    log.put(started({"stop": {"max_runs": 8}}))
    first, second = log.running()[:2]
    log.put(finished(first, 1_800_000_100.0, gain=1.5))  # completed
    cut = finished(second, 1_800_000_200.0, status="incomplete", gain=1.1)  # its deadline stopped it
    log.put(cut)
    third = log.running()[0]  # its campaign's driver could not drive it
    error = finished(third, 1_800_000_300.0, status="error", reason="RunBusy: run is being driven by pid 1")
    log.put(error)
    under_way = log.running()
    assert len(under_way) == 2 and len({first.run, second.run, third.run, *(s.run for s in under_way)}) == 5
    write_events(root / "campaigns" / CID / "log.aolog", log.events)
    # the runs' own logs: the completed one whole, the others cut before their end
    write_events(root / first.run / "log.aolog", synthetic_run(run_id=first.run, problems=1))
    for run in [second.run, third.run, *(s.run for s in under_way), ALONE_STOPPED, ALONE_KILLED]:
        write_events(root / run / "log.aolog", synthetic_run(run_id=run, problems=1, max_events=40))
    # the stopped runs: their drivers let them go as their time was up (as run_session does)
    for run, campaign in ((second.run, CID), (ALONE_STOPPED, "")):
        lock = RunLock.of_run(root, run, campaign=campaign).__enter__()
        state = time_up(campaign)
        lock.release(ended=state.name, why=state.detail)
    RunLock.of_run(root, third.run, campaign=CID).__enter__().release()  # a driver that gave up on it
    assert record_campaign_run(root, cut) and record_campaign_run(
        root, error
    )  # as the campaign's driver does
    # the campaign's driver and its runs under way, and a run of its own, killed
    _killed_holding(
        [f"of_campaign({str(root)!r}, {CID!r})"]
        + [f"of_run({str(root)!r}, {s.run!r}, campaign={CID!r})" for s in under_way]
    )
    _killed_holding([f"of_run({str(root)!r}, {ALONE_KILLED!r})"])
    return root, {
        "completed": first.run,
        "stopped": second.run,
        "failed": third.run,
        **{f"killed{i}": s.run for i, s in enumerate(under_way)},
    }


def _cli_json(capsys, *argv: str) -> list[dict]:
    capsys.readouterr()
    assert main(list(argv)) == 0
    return [json.loads(line) for line in capsys.readouterr().out.splitlines() if line.strip()]


def _get(url: str) -> dict:
    with urllib.request.urlopen(url, timeout=20) as r:
        return json.loads(r.read())


def test_runs_campaign_status_and_dashboard_agree(place, capsys) -> None:
    root, _ = place
    resume = f"accelopt campaign resume {CID} --root {root}"
    runs = {
        r["run_id"]: (r["state"], r["status"], r["resume"])
        for r in _cli_json(capsys, "runs", "--root", str(root), "--json")
    }
    (campaign,) = _cli_json(capsys, "campaign", "status", CID, "--root", str(root), "--json")
    in_campaign = {r["run"]: (r["state"], r["status"], r["resume"]) for r in campaign["run_list"]}
    with ServerThread(root, scan_interval_s=0.2) as server:
        listing = _get(server.url + "/api/runs")
        page = _get(server.url + f"/api/campaign/{CID}")
        run_page = _get(server.url + f"/api/run/{ALONE_KILLED}")
    dashboard = {r["run_id"]: (r["state"], r["status"], r["resume"]) for r in listing["runs"]}
    on_campaign_page = {row[1]: row[4] for row in page["runs"]}  # the run's status cell

    stopped = ("stopped", "stopped (by its campaign: its time was up)", "")
    failed = ("failed", "failed (RunBusy: run is being driven by pid 1)", "")
    interrupted = ("interrupted", "interrupted", resume)
    assert sorted(in_campaign.values()) == sorted(
        [("completed", "completed", ""), stopped, failed, interrupted, interrupted]
    )
    for run, said in in_campaign.items():  # the campaign's runs: the same everywhere
        assert runs[run] == dashboard[run] == said, run
        assert on_campaign_page[run] == said[1]
    assert (
        runs[ALONE_STOPPED]
        == dashboard[ALONE_STOPPED]
        == (
            "stopped",
            "stopped (its time was up)",
            f"accelopt resume {ALONE_STOPPED} --root {root}",
        )
    )
    assert (
        runs[ALONE_KILLED]
        == dashboard[ALONE_KILLED]
        == (
            "interrupted",
            "interrupted",
            f"accelopt resume {ALONE_KILLED} --root {root}",
        )
    )
    assert (run_page["run"]["state"], run_page["run"]["resume"]) == ("interrupted", runs[ALONE_KILLED][2])
    # the campaign: interrupted, with its resume command, and no run said to be running
    (row,) = listing["campaigns"]
    assert campaign["state"] == row["state"] == page["campaign"]["state"] == "interrupted"
    assert campaign["resume"] == row["resume"] == page["campaign"]["resume"] == resume
    assert campaign["running"] == [] and "running" not in row["run_states"]
    assert row["run_states"] == campaign["run_states"] == "1 completed, 1 failed, 2 interrupted, 1 stopped"


def test_the_lock_files_name_the_command_that_goes_on(place) -> None:
    root, runs = place
    resume = f"accelopt campaign resume {CID} --root {root}"
    assert read_lock(root / "campaigns" / CID / "run.lock").resume == resume
    for run in (runs["stopped"], runs["failed"], runs["killed0"], runs["killed1"]):
        info = read_lock(root / run / "run.lock")
        assert (info.resume, info.campaign) == (resume, CID), run
    assert (
        read_lock(root / ALONE_KILLED / "run.lock").resume == f"accelopt resume {ALONE_KILLED} --root {root}"
    )


def test_campaign_status_and_runs_say_how_to_go_on(place, capsys) -> None:
    root, runs = place
    capsys.readouterr()
    assert main(["campaign", "status", CID, "--root", str(root)]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert f"campaign {CID}: interrupted · 5 runs (1 completed, 1 failed, 2 interrupted, 1 stopped)" in out
    assert "running" not in out
    assert (
        f"campaign {CID} is interrupted (its driver died); to go on: accelopt campaign resume {CID} --root {root}"
        in out
    )
    capsys.readouterr()
    assert main(["runs", "--root", str(root)]) == 0
    out = " ".join(capsys.readouterr().out.split())
    for run in (runs["killed0"], runs["killed1"]):
        assert f"run {run} is interrupted (its driver died); to go on: accelopt campaign resume {CID}" in out
    assert (
        f"run {ALONE_KILLED} is interrupted (its driver died); to go on: accelopt resume {ALONE_KILLED}"
        in out
    )
    assert (
        f"run {ALONE_STOPPED} is stopped (its time was up); to go on: accelopt resume {ALONE_STOPPED}" in out
    )
    for run in (runs["stopped"], runs["failed"]):  # the campaign is done with them: nothing to go on with
        assert f"run {run} is" not in out
