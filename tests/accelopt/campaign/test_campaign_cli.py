"""Campaigns end to end through the CLI (real NATS, Ray, compiled CPU kernels, LanceDB; the
offline builtin/tuner model):

- kill -9 of a campaign (the CLI and every Ray process it started) in the middle of one of
  its runs, then `accelopt campaign resume`: every scheduled run is done exactly once (the
  killed one resumed, none of its kernels profiled twice), and `replay --verify` re-derives
  the campaign's schedule and each of its runs;
- the export: the best kernel of each item in its native form, and a Parquet row per memory
  entry whose fast kernel re-profiles correct;
- a budget cap (the tuner priced through the config): the runs' LLM calls never cost more
  than the cap, and the campaign stops on it; a device kind with no profiler is parked and
  reported, not waited on.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import time
from pathlib import Path

import pytest
from loop_cli import ACCELOPT, cli, kill_embedded_server, kill_session
from testdirs import HEADROOM_SUITE

from accelopt import catalog as c
from events.log import EventLog
from events.logfile import read_events
from events.runsource import running_server_url

TINY = [
    "search.iterations=1",
    "search.beam_width=1",
    "search.plans_per_candidate=2",
    "search.remeasure_rounds=0",
]
# a request the killed campaign's profiler held goes to the resumed one's after ack_wait_s
FAST_REDELIVERY = ["workers.ack_wait_s=8", "workers.heartbeat_s=2"]


def write_spec(path: Path, **extra: object) -> Path:
    spec = {
        "name": "t",
        "problems": [{"suite": str(HEADROOM_SUITE), "device": "cpu"}],
        "devices": {"cpu": {"profilers": 1, "preset": "quick", "set": TINY}},
        "set": ["profiling.timeout_s=60", *FAST_REDELIVERY],
        **extra,
    }
    path.write_text(json.dumps(spec))  # JSON is YAML
    return path


def history(root: Path, log_id: str) -> list[c.Event]:
    """A campaign's or run's events on the root's stream, while its server is up ([] if not)."""
    info = root / ".nats" / "server.json"
    try:
        url = json.loads(info.read_text())["url"]
    except (OSError, ValueError):
        return []

    async def read() -> list[c.Event]:
        elog = await EventLog.connect(url, create=False, name="test-reader", connect_timeout=2)
        try:
            return await elog.history(log_id)
        finally:
            await elog.close()

    try:
        return asyncio.run(read())
    except Exception:
        return []


def campaign_events(root: Path, cid: str) -> list[c.Event]:
    return read_events(root / "campaigns" / cid / "log.aolog")


@pytest.fixture(scope="module")
def resumed(tmp_path_factory):
    """A 3-run campaign killed -9 in the middle of its second run, then resumed."""
    tmp = tmp_path_factory.mktemp("campaign")
    root = tmp / "runs"
    spec = write_spec(tmp / "c.yaml", stop={"max_runs": 3})
    cid = "kill9"
    proc = subprocess.Popen(
        [*ACCELOPT, "campaign", "run", str(spec), "--id", cid, "--root", str(root)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    killed_in = None
    deadline = time.monotonic() + 400
    try:
        while time.monotonic() < deadline and killed_in is None:
            time.sleep(0.5)
            events = history(root, cid)
            finished = {e.run for e in events if isinstance(e, c.CampaignRunFinished)}
            for s in (e for e in events if isinstance(e, c.CampaignRunScheduled)):
                if s.run in finished:
                    continue
                if finished and any(isinstance(e, c.KernelProfiled) for e in history(root, s.run)):
                    killed_in = s.run  # a run is under way, one finished before it
                    break
        assert killed_in is not None, "the campaign did not get to its second run"
        kill_session(proc.pid)
        proc.wait(10)
    finally:
        if proc.poll() is None:
            kill_session(proc.pid)
    status = cli("campaign", "status", cid, "--json", root=root)
    before = json.loads(status.stdout.splitlines()[-1]) if status.returncode == 0 else {}
    r = cli("campaign", "resume", cid, root=root, timeout=600)
    yield root, cid, killed_in, before, r
    kill_embedded_server(root)


def test_kill_9_then_resume_loses_nothing_and_repeats_nothing(resumed) -> None:
    root, cid, killed_in, before, r = resumed
    resume = f"accelopt campaign resume {cid} --root {root}"
    assert before.get("state") == "interrupted" and before.get("resume") == resume, before
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    # it says at once which runs it picks up and what it waits for, before the agents' start
    said = r.stdout.splitlines()
    picked = next(i for i, line in enumerate(said) if "picks up" in line)
    assert f"{killed_in} (" in said[picked] and "resumed from its log" in said[picked], said[picked]
    starting = next(i for i, line in enumerate(said) if "starting the agents" in line)
    assert picked < starting < next(i for i, line in enumerate(said) if "): completed" in line)
    assert running_server_url(root) is None  # nothing left running
    events = campaign_events(root, cid)
    scheduled = [e for e in events if isinstance(e, c.CampaignRunScheduled)]
    finished = [e for e in events if isinstance(e, c.CampaignRunFinished)]
    assert [s.index for s in scheduled] == [1, 2, 3]  # no run scheduled twice, none lost
    assert sorted(f.run for f in finished) == sorted(s.run for s in scheduled)  # each finished once
    assert sum(isinstance(e, c.CampaignResumed) for e in events) == 1
    stop = events[-1]
    assert isinstance(stop, c.CampaignStopped) and stop.reason == "max_runs"
    for s in scheduled:
        run_events = read_events(root / s.run / "log.aolog")
        assert sum(isinstance(e, c.RunStarted) for e in run_events) == 1
        assert any(isinstance(e, c.RunCompleted) for e in run_events), s.run
        profiled = [e.kernel_id for e in run_events if isinstance(e, c.KernelProfiled)]
        assert len(profiled) == len(set(profiled)), f"{s.run}: a kernel profiled twice"
    # the killed run was continued, not started again: its log starts before the kill
    killed = read_events(root / killed_in / "log.aolog")
    resumed_at = next(e.ts for e in events if isinstance(e, c.CampaignResumed))
    assert killed[0].ts < resumed_at < killed[-1].ts
    # a run that found something faster hands its kernel on: later runs of the item start from it
    gains = {f.run: f for f in finished}
    for s in scheduled:
        if s.start_run is not None:
            prev = gains[s.start_run]
            assert prev.gain and prev.gain > 1 and s.start_kernel == prev.best_kernel_id
            started = next(e for e in read_events(root / s.run / "log.aolog") if isinstance(e, c.RunStarted))
            assert started.targets[0].problem.baseline.entry_file().content == prev.best_source
    assert any(s.start_run for s in scheduled)


def test_replay_verify_re_derives_the_campaign_and_its_runs(resumed) -> None:
    root, cid, *_ = resumed
    r = cli("replay", cid, "--verify", root=root)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "scheduler decisions of campaign" in r.stdout and "each of its 3 runs" in r.stdout


def test_export_round_trips_and_every_fast_kernel_profiles_correct(resumed, tmp_path) -> None:
    import pyarrow.parquet as pq

    from accelopt.config import RunConfig
    from accelopt.kernel_id import kernel_id
    from actors.roles.profiler import kernel_solution
    from hardware_agents.families import get_agent, profile_timeout_s
    from memory_index import MemoryIndex
    from suites import load_problem_dir, suite_info

    root, cid, *_ = resumed
    out = tmp_path / "export"
    r = cli("campaign", "export", cid, "--out", str(out), root=root)
    assert r.returncode == 0, r.stdout + r.stderr
    manifest = json.loads((out / "manifest.json").read_text())
    assert {k["item"] for k in manifest["kernels"]} == {"headroom/rowsum@cpu", "headroom/rownorm@cpu"}
    table = pq.read_table(out / "pairs.parquet")
    memory = MemoryIndex.open(str(root / "memory"))
    assert table.num_rows == memory.count() > 0
    rows = table.to_pylist()
    assert {r["id"] for r in rows} == {e.id for e in memory.iter_entries()}
    assert all(r["fast_profile"] and r["slow_status"] for r in rows)  # joined with the runs' profiles
    # a kernel id is its content's: one id, one source, across all the rows of all the runs, and
    # the ids the runs' logs paired are the same
    named: dict[str, set[str]] = {}
    for row in rows:
        for side in ("slow", "fast"):
            kid, source = row[f"{side}_kernel_id"], row[f"{side}_kernel"]
            assert kid == kernel_id(row["problem"], row["language"], source)
            named.setdefault(kid, set()).add(source)
    assert all(len(sources) == 1 for sources in named.values()), named
    paired = {
        (e.slow_kernel_id, e.fast_kernel_id)
        for run in {r["source_run"] for r in rows}
        for e in read_events(root / run / "log.aolog")
        if isinstance(e, c.SummaryRequested)
    }
    assert {(r["slow_kernel_id"], r["fast_kernel_id"]) for r in rows} <= paired
    info = suite_info(str(HEADROOM_SUITE))
    agent = get_agent("cpu")
    fast = {(r["problem"], r["fast_kernel"]): r for r in rows}  # each distinct fast kernel once
    try:
        for row in fast.values():
            problem = load_problem_dir(HEADROOM_SUITE / row["problem"], info)
            prof = agent.profile(
                problem,
                kernel_solution(
                    problem.name, row["fast_kernel_id"], "c", row["fast_kernel"], problem.baseline
                ),
                timeout_s=profile_timeout_s("cpu", RunConfig().profiling),
            )
            assert prof.status == "passed", (row["id"], prof.status, prof.log[-500:])
    finally:
        agent.close()
    for k in manifest["kernels"]:  # each best kernel in its native form: a C file, named by its content
        (path,) = k["files"]
        assert path.endswith(".c") and (out / path).read_text().strip()
        problem = k["item"].split("/", 1)[1].split("@", 1)[0]
        assert k["kernel_id"] == kernel_id(problem, "c", (out / path).read_text())


def test_the_pairs_load_in_pandas(resumed, tmp_path) -> None:
    """Where pandas is installed (it is not a dependency: the file is plain Parquet written by
    pyarrow, the engine pandas reads it with)."""
    pd = pytest.importorskip("pandas")
    root, cid, *_ = resumed
    out = tmp_path / "export"
    assert cli("campaign", "export", cid, "--out", str(out), root=root).returncode == 0
    frame = pd.read_parquet(out / "pairs.parquet")
    assert len(frame) > 0 and {"slow_kernel", "fast_kernel", "insight", "fast_profile"} <= set(frame.columns)


def test_status_report_and_dashboard_model_show_the_campaign(resumed, tmp_path) -> None:
    from replay.campaign import load_campaign
    from replay.dashboard.campaign_models import campaign_model
    from replay.states import campaign_driver, campaign_state

    root, cid, *_ = resumed
    r = cli("campaign", "status", cid, root=root)
    assert r.returncode == 0 and "completed (max_runs)" in r.stdout and "headroom/rowsum@cpu" in r.stdout
    html = tmp_path / "report.html"
    r = cli("report", cid, "--out", str(html), root=root)
    assert r.returncode == 0, r.stdout + r.stderr
    text = html.read_text()
    assert "The queues" in text and "headroom/rownorm@cpu" in text and "speedup-cpu" in text
    view = load_campaign(cid, root)
    state = campaign_state(view, campaign_driver(root, cid), root=str(root))
    model = campaign_model(view, "file", state, streaming=False)
    assert model.campaign.runs == 3 and len(model.runs) == 3 and model.devices[0].queue
    assert model.campaign.status == "completed (max_runs)" and model.campaign.run_states == "3 completed"


@pytest.fixture(scope="module")
def budgeted(tmp_path_factory):
    """The tuner priced at $2 / $8 per million tokens, a $0.08 cap, and a device kind (trn1)
    whose problems have no profiler."""
    tmp = tmp_path_factory.mktemp("budget")
    root = tmp / "runs"
    prices = [
        "llm.prices.builtin/tuner.input_cost_per_token=0.000002",
        "llm.prices.builtin/tuner.output_cost_per_token=0.000008",
    ]
    spec = write_spec(
        tmp / "c.yaml",
        problems=[
            {"suite": str(HEADROOM_SUITE), "device": "cpu"},
            {"suite": "nki_tune", "device": "trn1", "problems": ["silu"]},
        ],
        devices={"cpu": {"profilers": 1, "set": TINY}, "trn1": {"profilers": 0}},
        budget={"total_usd": 0.08, "max_call_usd": 0.004},
        stop={"max_runs": 30},
        unserved_fail_after_s=5,
        set=["profiling.timeout_s=60", *FAST_REDELIVERY, *prices],
    )
    t0 = time.monotonic()
    r = cli("campaign", "run", str(spec), "--id", "capped", root=root, timeout=900)
    yield root, "capped", r, time.monotonic() - t0
    kill_embedded_server(root)


def test_a_budget_cap_holds_to_the_cent(budgeted) -> None:
    root, cid, r, _ = budgeted
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    events = campaign_events(root, cid)
    stop = events[-1]
    assert isinstance(stop, c.CampaignStopped) and stop.reason == "budget", stop
    scheduled = [e for e in events if isinstance(e, c.CampaignRunScheduled) and e.device == "cpu"]
    assert len(scheduled) >= 2
    spent = 0.0
    for s in scheduled:
        run_events = read_events(root / s.run / "log.aolog")
        started = next(e for e in run_events if isinstance(e, c.RunStarted))
        assert started.config["llm"]["budget_usd"] == s.budget_usd  # each run got its share, to the cent
        assert round(s.budget_usd * 100) == pytest.approx(s.budget_usd * 100)
        spent += sum(e.cost_usd for e in run_events if isinstance(e, c.LLMCallCompleted))
    assert 0 < spent <= 0.08  # what the runs' calls cost, read from their own logs
    last = [e for e in events if isinstance(e, c.CampaignBudgetSpent)][-1]
    assert last.spent_usd == pytest.approx(spent, abs=1e-9) and last.total_usd == 0.08


def test_a_device_with_no_profiler_is_parked_and_reported(budgeted) -> None:
    root, cid, r, _ = budgeted
    events = campaign_events(root, cid)
    (parked,) = [e for e in events if isinstance(e, c.CampaignDeviceParked)]
    assert parked.device == "trn1" and parked.items == ["nki_tune/silu@trn1"]
    assert "accelopt worker --device trn1" in parked.reason
    trn = [e for e in events if isinstance(e, c.CampaignRunFinished) and e.item == "nki_tune/silu@trn1"]
    assert len(trn) == 1 and trn[0].status == "failed" and trn[0].unserved == ["profiler-trn1"]
    assert trn[0].duration_s < 60  # given up after unserved_fail_after_s, not waited on
    assert "parked trn1" in r.stdout
