"""A log written before an event type changed still folds, verifies and ablates.

`data/run_before_event_versions.aolog` is a real run (cpu `silu`, the quick preset, memory off,
no re-measure) recorded when every event type was at version 1. Since then `RunCompleted`
renamed `best` to `best_kernel_ids` (version 2, `accelopt/upcasters.py`): the log's
`RunCompleted` is read through the upcaster, and the fold, `replay --verify` and an
unchanged `accelopt ablate` of the file work as they did. The ablation runs for real (NATS,
Ray, the offline tuner): every LLM reply and profile is served from the file's recording,
each prompt rebuilt byte for byte (a served reply is found by its prompt's content hash). A
change of a prompt template changes these prompts too: this test says so, and the fixture is
recorded again with the change.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import msgspec
import pytest

from accelopt import catalog as ev
from accelopt.upcasters import UPCASTERS
from cli.main import main
from events.logfile import LogFileError, read_events, read_records
from replay.fold import RunView
from replay.recording import served_counts
from replay.verify import verify

LOG = Path(__file__).parent / "data" / "run_before_event_versions.aolog"


def test_the_fixture_was_written_at_version_1_of_every_type() -> None:
    _, records = read_records(LOG)
    versions = {msgspec.msgpack.decode(data)["schema_version"] for _, data in records}
    assert versions == {1}


def test_the_renamed_field_is_read_and_the_log_folds_and_verifies(capsys) -> None:
    events = read_events(LOG)
    [done] = [e for e in events if isinstance(e, ev.RunCompleted)]
    assert done.schema_version == 2
    view = RunView.from_events(events)
    assert done.best_kernel_ids == {"silu": view.problems["silu"].best_id} and view.problems["silu"].best_id
    [result] = view.results()
    assert result.problem == "silu" and result.speedup is not None and result.speedup > 1
    report = verify(events)
    assert report.ok and report.decisions_checked == 46, report.divergence
    assert main(["replay", str(LOG), "--verify"]) == 0
    assert "verified: 46 coordinator decisions" in capsys.readouterr().out


def test_without_its_upcaster_the_log_is_refused_not_misread(monkeypatch) -> None:
    monkeypatch.delitem(UPCASTERS, ("RunCompleted", 1))
    with pytest.raises(LogFileError, match=r"record 101: .*no upcaster reads RunCompleted version 1"):
        read_events(LOG)


def test_an_unchanged_ablation_of_the_fixture_is_served_in_full(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "ACCELOPT_MEMORY"}
    env["ACCELOPT_LOG_LEVEL"] = "ERROR"
    root = tmp_path / "runs"
    r = subprocess.run(
        [sys.executable, "-m", "cli.main", "ablate", str(LOG), "--run-id", "abl-v1", "--root", str(root)],
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
    )
    assert r.returncode == 0, r.stdout + r.stderr
    assert "24 of 24 LLM calls (0 made anew), 6 of 6 profiles" in r.stdout, r.stdout
    recorded, ablated = read_events(LOG), read_events(root / "abl-v1" / "log.aolog")
    served = served_counts(ablated)
    assert served.llm_calls == served.llm_served == 24 and served.profiles == served.profiles_served == 6
    [done] = [e for e in ablated if isinstance(e, ev.RunCompleted)]
    [before] = [e for e in recorded if isinstance(e, ev.RunCompleted)]
    assert done.best_kernel_ids == before.best_kernel_ids
    # each profile the one recorded for its request; each prompt the recording's, byte for byte
    recorded_profiles = {e.request_id: e.profile for e in recorded if isinstance(e, ev.KernelProfiled)}
    for profiled in (e for e in ablated if isinstance(e, ev.KernelProfiled)):
        assert profiled.profile == recorded_profiles[profiled.request_id]
    prompts = {e.content_hash: e.messages for e in recorded if isinstance(e, ev.LLMCallCompleted)}
    for call in (e for e in ablated if isinstance(e, ev.LLMCallCompleted)):
        assert call.messages == prompts[call.content_hash]
