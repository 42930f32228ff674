"""Kernels named by their content (accelopt/kernel_id.py): one id is one source across runs, a
source proposed again is the kernel its first proposal made (profiled once, counted once,
its lineage the first one's) for the coordinator, the fold and `replay --verify` alike, and a
log recorded before kernels were content-addressed still folds, verifies and reports.

The synthetic runs are the real coordinator core driven by the simulated world, whose
tuner-like moves on two constants come back to sources already proposed; the real run is
the shared one of tests/replay/conftest.py (NATS, Ray, compiled CPU kernels, the offline
tuner), whose one tunable makes the tuner propose some sources twice; the old log is a
real run recorded before the change (see OLD_LOG)."""

from __future__ import annotations

import shutil
from collections import Counter, defaultdict
from pathlib import Path

import msgspec
import pytest

from accelopt import catalog as ev
from accelopt.kernel_id import kernel_id
from cli.main import main
from events.logfile import read_events
from replay.campaign_export import RunFacts
from replay.fold import RunView
from replay.verify import verify

# `accelopt run --suite tests/accelopt/loop/headroom_suite --problems rownorm --set
# search.iterations=3 --set search.remeasure_rounds=1 --root R` at 21e1f4a, the commit before
# kernels were content-addressed: 11 kernels proposed under 11 ids, of 5 sources; and the
# memory its curator wrote (R/memory: LanceDB, 3 entries)
OLD_LOG = Path(__file__).parent / "data" / "run_before_content_ids.aolog"
OLD_MEMORY = Path(__file__).parent / "data" / "memory_before_content_ids"


def proposals(events: list[ev.Event]) -> list[ev.KernelProposed]:
    return [e for e in events if isinstance(e, ev.KernelProposed)]


def search_profiles(events: list[ev.Event]) -> list[ev.ProfileRequested]:
    return [e for e in events if isinstance(e, ev.ProfileRequested) and e.purpose != "remeasure"]


def one_to_one(events: list[ev.Event]) -> tuple[dict[str, set], dict[tuple, set]]:
    """kernel id -> the contents it names, content -> the ids naming it (proposals and profile
    requests)."""
    sources: dict[str, set] = defaultdict(set)
    ids: dict[tuple, set] = defaultdict(set)
    for e in events:
        if isinstance(e, ev.KernelProposed | ev.ProfileRequested):
            content = (e.problem, e.language, e.source)
            sources[e.kernel_id].add(content)
            ids[content].add(e.kernel_id)
    return sources, ids


def first_parent(firsts: dict[str, ev.KernelProposed], kid: str) -> str | None:
    """The candidate a kernel's first proposal came from (a fix: its broken kernel's)."""
    k = firsts[kid]
    while k.fix_of:
        k = firsts[k.fix_of]
    return k.parent_id


@pytest.fixture(scope="module")
def two_runs(synthetic) -> tuple[list[ev.Event], list[ev.Event]]:
    shape = ("search.iterations=4", "search.beam_width=2", "llm.budget_usd=1000")
    return (
        synthetic(run_id="first", problems=2, seed=1, overrides=shape),
        synthetic(run_id="second", problems=2, seed=2, overrides=shape),
    )


def test_an_id_names_one_source_and_a_source_has_one_id_across_runs(two_runs):
    first, second = two_runs
    sources, ids = one_to_one(first + second)
    assert all(len(s) == 1 for s in sources.values()), "an id names two sources"
    assert all(len(i) == 1 for i in ids.values()), "a source has two ids"
    for e in proposals(first + second):
        assert e.kernel_id == kernel_id(e.problem, e.language, e.source)
    # not vacuous: both runs proposed some of the same sources (their baselines and more),
    # each run through requests of its own
    shared = {k.kernel_id for k in proposals(first)} & {k.kernel_id for k in proposals(second)}
    assert len(shared) > 2
    asked = {e.kernel_id: e.request_id for e in proposals(first) if e.kernel_id in shared and e.iteration}
    assert any(e.request_id != asked.get(e.kernel_id, e.request_id) for e in proposals(second))


def test_a_source_proposed_again_is_profiled_once_and_counted_once(two_runs):
    for log in two_runs:
        assert isinstance(log[-1], ev.RunCompleted)  # every request answered, duplicates included
        assert verify(log).ok
        proposed = proposals(log)
        distinct = {e.kernel_id for e in proposed}
        assert len(proposed) > len(distinct)  # the run came back to sources it had proposed
        profiled = Counter(e.kernel_id for e in search_profiles(log))
        assert set(profiled) == distinct and set(profiled.values()) == {1}
        view = RunView.from_events(log)
        for name, p in view.problems.items():
            mine = [e for e in proposed if e.problem == name]
            firsts = {}
            for e in mine:
                firsts.setdefault(e.kernel_id, e)
            assert p.kernels_seen == len(p.kernel_ids) == len(firsts)
            assert p.duplicates == len(mine) - len(firsts)
            done = [e for e in log if isinstance(e, ev.IterationCompleted) and e.problem == name]
            assert p.kernels_profiled == done[-1].kernels_profiled == len(firsts)
            for kid, first in firsts.items():  # the lineage is the first proposal's
                k = view.kernels[kid]
                assert (k.iteration, k.fix_of, k.fix_round) == (
                    first.iteration,
                    first.fix_of,
                    first.fix_round,
                )
                if not first.fix_of:
                    assert (k.parent_id, k.plan_id) == (first.parent_id, first.plan_id)
        for beam in (e for e in log if isinstance(e, ev.BeamSelected)):
            ids = [m.kernel_id for m in beam.beam]
            assert len(ids) == len(set(ids))
            assert len({view.kernels[i].source for i in ids}) == len(ids)
        pairs = [
            frozenset((e.slow_kernel_id, e.fast_kernel_id)) for e in log if isinstance(e, ev.SummaryRequested)
        ]
        assert len(pairs) == len(set(pairs))  # a pair of kernels is learnt once
    # a proposal of a known kernel is a sample of its own plan too: some insight pairs a kernel
    # with a candidate that is not the parent of its first proposal (under "the first proposal
    # only" no plan but the first could pair it)
    crossed = 0
    for log in two_runs:
        firsts: dict[str, ev.KernelProposed] = {}
        for e in proposals(log):
            firsts.setdefault(e.kernel_id, e)
        for e in (e for e in log if isinstance(e, ev.SummaryRequested)):
            child, candidate = (
                (e.fast_kernel_id, e.slow_kernel_id) if e.positive else (e.slow_kernel_id, e.fast_kernel_id)
            )
            crossed += first_parent(firsts, child) != candidate
    assert crossed > 0


def test_a_remeasure_names_the_kernel_it_times_and_leaves_its_profile(two_runs):
    for log in two_runs:
        view = RunView.from_events(log)
        remeasures = [e for e in log if isinstance(e, ev.ProfileRequested) and e.purpose == "remeasure"]
        assert remeasures
        first_profile = {}
        for e in log:
            if isinstance(e, ev.KernelProfiled):
                first_profile.setdefault(e.kernel_id, e.profile)
        for r in remeasures:
            p = view.problems[r.problem]
            assert r.kernel_id in (p.baseline_id, p.best_id)
            assert r.kernel_id == kernel_id(r.problem, r.language, r.source)
            assert view.kernels[r.kernel_id].profile == first_profile[r.kernel_id]  # the search's


def test_a_log_recorded_before_content_ids_folds_verifies_and_reports(tmp_path, capsys):
    events = read_events(OLD_LOG)
    started = events[0]
    assert isinstance(started, ev.RunStarted) and started.kernel_ids == "request"
    report = verify(events)
    assert report.ok and report.decisions_checked > 40, report.divergence
    proposed = proposals(events)
    # its ids were not content ids: 11 ids for 5 sources, as recorded
    assert len({e.kernel_id for e in proposed}) == 11 and len({e.source for e in proposed}) == 5
    view = RunView.from_events(events)
    [result] = view.results()
    assert result.problem == "rownorm" and result.kernels == 11 and result.speedup > 1
    assert result.remeasured_speedup is not None
    # through the CLI, as a user would: replay --verify and the report, from a root
    run_dir = tmp_path / started.run_id
    run_dir.mkdir()
    (run_dir / "log.aolog").write_bytes(OLD_LOG.read_bytes())
    assert main(["replay", started.run_id, "--verify", "--root", str(tmp_path)]) == 0
    assert "verified: 52 coordinator decisions" in capsys.readouterr().out
    out = tmp_path / "report.html"
    assert main(["report", started.run_id, "--root", str(tmp_path), "--out", str(out)]) == 0
    assert "rownorm" in out.read_text()


def test_an_old_logs_kernels_are_joined_by_their_content_ids():
    """The read side maps an old log's ids to content ids (`RunFacts.content_id`), so its
    memory entries, whose kernels are named by content, join its profiles."""
    events = read_events(OLD_LOG)
    facts = RunFacts(events)
    proposed = proposals(events)
    assert len(facts.content_id) == 11 and len(set(facts.content_id.values())) == 5
    for e in proposed:
        assert facts.content_id[e.kernel_id] == kernel_id(e.problem, e.language, e.source)
    assert set(facts.profiles) == set(facts.content_id.values())
    entries = [e.entry for e in events if isinstance(e, ev.MemoryEntryAdded)]
    assert entries
    for entry in entries:
        pair = facts.entry_pair[entry.id]
        assert facts.content_id[pair.slow_kernel_id] == entry.slow_kernel_id
        assert facts.content_id[pair.fast_kernel_id] == entry.fast_kernel_id
        assert facts.profiles[entry.fast_kernel_id].status == "passed"


def test_the_export_of_an_old_run_and_its_old_memory_names_kernels_by_content(tmp_path):
    """A memory written before kernels were content-addressed opens as it is (its rows hold
    sources, no kernel ids), and `pairs.parquet` names its kernels by content, joined with the
    profiles of the old run's log through the read-side mapping."""
    import pyarrow.parquet as pq
    from campaign_log import started

    from replay.campaign import CampaignView
    from replay.campaign_export import PAIRS_FILE, export_campaign

    events = read_events(OLD_LOG)
    run_id = events[0].run_id
    root = tmp_path / "runs"
    (root / run_id).mkdir(parents=True)
    (root / run_id / "log.aolog").write_bytes(OLD_LOG.read_bytes())
    memory = tmp_path / "memory"
    shutil.copytree(OLD_MEMORY, memory)  # opened where it is copied: the fixture stays as written
    start = msgspec.structs.replace(started({}, items=[]), memory_uri=str(memory))
    out = tmp_path / "export"
    export_campaign(CampaignView.from_events([start]), root, out)
    rows = pq.read_table(out / PAIRS_FILE).to_pylist()
    recorded = [e for e in events if isinstance(e, ev.SummaryRequested)]
    assert len(rows) == 3 and {r["source_run"] for r in rows} == {run_id}
    named: dict[str, set[str]] = defaultdict(set)
    for row in rows:
        for side in ("slow", "fast"):
            kid, source = row[f"{side}_kernel_id"], row[f"{side}_kernel"]
            assert kid == kernel_id(row["problem"], row["language"], source)
            named[kid].add(source)
            assert row[f"{side}_status"] == "passed" and row[f"{side}_profile"]  # joined
    assert all(len(sources) == 1 for sources in named.values())
    # the old log paired other ids: the export mapped them, it did not copy them
    assert not set(named) & {i for r in recorded for i in (r.slow_kernel_id, r.fast_kernel_id)}


def test_a_real_run_profiles_a_source_it_proposed_twice_once(shared_real_run):
    outcome = shared_real_run.wait()
    events = read_events(outcome.run_dir / "log.aolog")
    assert isinstance(events[0], ev.RunStarted) and events[0].kernel_ids == "content"
    assert verify(events).ok
    sources, ids = one_to_one(events)
    assert all(len(s) == 1 for s in sources.values()) and all(len(i) == 1 for i in ids.values())
    proposed = proposals(events)
    for e in proposed:
        assert e.kernel_id == kernel_id(e.problem, e.language, e.source)
    distinct = {e.kernel_id for e in proposed}
    assert len(proposed) > len(distinct), "the tuner proposed no source twice: nothing was tested"
    profiled = Counter(e.kernel_id for e in search_profiles(events))
    assert set(profiled) == distinct and set(profiled.values()) == {1}
    answered = Counter(e.request_id for e in events if isinstance(e, ev.KernelProfiled))
    requested = {e.event_id for e in events if isinstance(e, ev.ProfileRequested)}
    assert set(answered) == requested and set(answered.values()) == {1}
    view = RunView.from_events(events)
    p = view.problems["rownorm"]
    assert p.kernels_seen == len(distinct) and p.duplicates == len(proposed) - len(distinct)
    last = [e for e in events if isinstance(e, ev.IterationCompleted)][-1]
    assert p.kernels_profiled == last.kernels_profiled == len(distinct)
    for r in (e for e in events if isinstance(e, ev.ProfileRequested) and e.purpose == "remeasure"):
        assert r.kernel_id in (p.baseline_id, p.best_id)
