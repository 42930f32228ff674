"""benchmarks/newcomer_bench.py's checks, each on real input: a rich table as `campaign status`
prints it, real processes for the kill -9 survivor check, and the 15% comparison."""

from __future__ import annotations

import contextlib
import io
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

import newcomer_bench as nb

ITEMS = ["cpu_v2/rope_single_freq_apply@cpu", "nki_tune/silu@trn1"]


def test_status_table_reads_each_item_of_rows_over_several_lines() -> None:
    table = Table(title="items")  # as cli/campaign_status.py builds it
    for col in ("item", "runs", "speedup", "% of peak", "how measured", "state", "why"):
        table.add_column(col, justify="right" if col in ("runs", "speedup", "% of peak") else "left")
    why = "ready: expected gain +22% per run (not run yet: what first runs here gained, with the prior)"
    table.add_row(ITEMS[0], "1", "1.46x", "11.5%", "measured (3 rounds, ±39%)", "ready", why * 2)
    table.add_row(ITEMS[1], "3", "est. 2.50x", "83.3%", "estimated", "ready", why)
    out = io.StringIO()
    Console(file=out, width=160).print(table)  # the width `campaign status` prints at
    assert out.getvalue().count("\n") > 8  # its rows span lines
    assert nb.status_table(out.getvalue()) == {ITEMS[0]: 1.46, ITEMS[1]: 2.5}


def test_compare_misses_a_figure_past_15pct_and_a_surface_that_showed_nothing() -> None:
    measured = {ITEMS[0]: {"speedup": 2.0}, ITEMS[1]: {"speedup": 2.5}}
    shown = {s: {ITEMS[0]: 2.0 * 1.14, ITEMS[1]: 2.5} for s in nb.SURFACES}
    ok = nb.compare(shown, measured, ITEMS)
    assert ok["met"] and ok["within_15pct"] == ok["compared"] == 2 * len(nb.SURFACES)
    assert not ok["surfaces_disagreeing"]

    shown["report"] = {ITEMS[0]: 2.0 * 1.16, ITEMS[1]: 2.5}
    off = nb.compare(shown, measured, ITEMS)
    assert not off["met"] and off["within_15pct"] == 2 * len(nb.SURFACES) - 1
    assert set(off["surfaces_disagreeing"]) == {ITEMS[0]}

    shown["report"] = shown["driver notes"]
    del shown["dashboard"]  # a surface that answered nothing is not a pass
    missing = nb.compare(shown, measured, ITEMS)
    assert not missing["met"]
    assert missing["not_compared"] == [f"dashboard: {i}" for i in ITEMS]


SPAWN = """
import os, subprocess, sys, time
subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"], start_new_session={escape})
print("ready", flush=True)
time.sleep(120)
"""


def _driver(tag: str, escape: bool) -> subprocess.Popen:
    """A stand-in driver (a real process in a session of its own, as the bench starts the CLI)
    whose child stays in its session or leaves it."""
    env = {**os.environ, nb.TAG_VAR: tag}
    proc = subprocess.Popen(
        [sys.executable, "-c", SPAWN.format(escape=escape)],
        env=env,
        stdout=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
    time.sleep(0.5)  # the child's exec done
    return proc


def _reap(tag: str) -> None:
    """Whatever of a stand-in is left where a check failed."""
    for p in nb.processes().values():
        if p.tag == tag:
            with contextlib.suppress(OSError):
                os.kill(p.pid, signal.SIGKILL)


def test_kill_driver_reports_a_process_that_left_the_session_and_kills_it() -> None:
    tag = f"test-{os.getpid()}-escape"
    try:
        proc = _driver(tag, escape=True)
        info = nb.kill_driver(proc, tag)
        assert proc.returncode is not None
        survivors = info["survivors_after_5s"]
        assert len(survivors) == 1 and "sleep(120)" in survivors[0]["cmdline"]
        time.sleep(0.5)
        assert not nb.alive(nb.processes(), {}, tag)  # cleaned up after being reported
    finally:
        _reap(tag)


def test_kill_driver_finds_no_survivor_where_everything_stayed_in_the_session() -> None:
    tag = f"test-{os.getpid()}-stay"
    try:
        proc = _driver(tag, escape=False)
        info = nb.kill_driver(proc, tag)
        assert info["processes"] == 2 and info["killed_in_session"] == 2
        assert info["survivors_after_5s"] == []
    finally:
        _reap(tag)
