"""`accelopt remeasure RUN`: a real recorded run's best kernels and baselines re-profiled on
the CPU (real compiles, sandboxed runs), as JSON and as a table, saved in the run directory;
a kernel that no longer compiles, a device that cannot compile C, and missing runs/problems."""

from __future__ import annotations

import msgspec
import pytest

from accelopt import catalog as ev
from actors.roles.profiler import seeds_for
from actors.runtime.kernel_remeasure import RemeasureRecord
from cli.main import main
from events.logfile import read_events
from replay.fold import RunView


def saved(run_dir, device: str) -> list:
    return sorted(run_dir.glob(f"remeasure-{device}-*.json"))


def test_json_has_remeasured_numbers_for_every_problem(real_run, capsys):
    root = real_run.run_dir.parent
    before = saved(real_run.run_dir, "cpu")
    assert (
        main(["remeasure", real_run.run_id, "--root", str(root), "--rounds", "2", "--seed", "4242", "--json"])
        == 0
    )
    rec = msgspec.json.decode(capsys.readouterr().out, type=RemeasureRecord)
    assert (
        rec.ok and rec.run_id == real_run.run_id and rec.device == rec.run_device == "cpu" and rec.rounds == 2
    )
    results = {r.problem: r for r in real_run.view.results()}
    assert {r.problem for r in rec.rows} == set(results)
    for row in rec.rows:
        recorded = results[row.problem]
        assert row.status == "passed" and row.best and row.kernel_id == recorded.best_kernel_id
        assert (row.recorded_baseline_ms, row.recorded_ms) == (recorded.baseline_ms, recorded.best_ms)
        assert len(row.baseline_rounds_ms) == 2
        assert row.baseline_ms > 0 and row.ms > 0 and row.speedup > 0 and 0 < row.peak_fraction < 1.5
        assert row.speedup == pytest.approx(row.baseline_ms / row.ms)
    # fresh seeds: none of those the run checked its kernels with
    used = {
        s
        for e in read_events(real_run.run_dir / "log.aolog")
        if isinstance(e, ev.ProfileRequested)
        for s in seeds_for(e)
    }
    assert len(rec.seeds) == 2 and not used & {s for r in rec.seeds for s in r}
    (path,) = set(saved(real_run.run_dir, "cpu")) - set(before)
    assert msgspec.json.decode(path.read_bytes(), type=RemeasureRecord) == rec


def test_table_of_all_kernels(real_run, capsys):
    before = saved(real_run.run_dir, "cpu")
    assert main(["remeasure", str(real_run.run_dir), "--rounds", "1", "--all-kernels"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    for header in ("recorded", "re-measured", "baseline ms", "best ms", "speedup", "% of peak", "status"):
        assert header in out
    (path,) = set(saved(real_run.run_dir, "cpu")) - set(before)
    rec = msgspec.json.decode(path.read_bytes(), type=RemeasureRecord)
    view = RunView.from_events(
        read_events(real_run.run_dir / "log.aolog")
    )  # every kernel (the run's own view is compact)
    for problem in view.problems.values():
        base = view.kernels[problem.baseline_id]
        passed = {k.source for k in map(view.kernels.get, problem.kernel_ids) if k.passed} - {base.source}
        rows = [r for r in rec.rows if r.problem == problem.name]
        assert len(rows) == max(len(passed), 1) + (problem.best_id == base.kernel_id and bool(passed))
        assert sum(r.best for r in rows) == 1 and all(r.status == "passed" and r.ms for r in rows)
        assert problem.name in out and "passed" in out


def test_a_kernel_that_no_longer_compiles_fails_the_command(real_run, tmp_path, export_log, capsys):
    view = real_run.view
    problem = sorted(view.problems)[0]
    best_id = view.problems[problem].best_id
    events = [
        msgspec.structs.replace(e, source="#error tampered by the test\n" + e.source)
        if isinstance(e, ev.KernelProposed) and e.kernel_id == best_id
        else e
        for e in read_events(real_run.run_dir / "log.aolog")
    ]
    run_dir = tmp_path / "runs" / real_run.run_id
    export_log(events, run_dir / "log.aolog")
    assert main(["remeasure", str(run_dir), "--rounds", "2", "--problems", problem]) == 1
    out = capsys.readouterr().out
    assert "compile_error" in out and "error: #error tampered by the test" in out
    (path,) = saved(run_dir, "cpu")
    rec = msgspec.json.decode(path.read_bytes(), type=RemeasureRecord)
    (row,) = rec.rows
    assert not rec.ok and row.status.startswith("compile_error") and row.ms is None and row.speedup is None
    assert "#error tampered by the test" in row.log_head


def test_a_device_that_cannot_compile_c(real_run, capsys):
    from hardware_agents.families import available_devices

    if "h100" not in available_devices():
        pytest.skip("no Triton agent on this machine")
    assert (
        main(
            [
                "remeasure",
                real_run.run_id,
                "--root",
                str(real_run.run_dir.parent),
                "--device",
                "h100",
                "--rounds",
                "1",
            ]
        )
        == 1
    )
    out = capsys.readouterr().out
    assert "compile_error" in out and "Python/Triton" in out


def test_missing_run_problem_or_device(real_run, tmp_path, capsys):
    root = tmp_path / "runs"
    assert main(["remeasure", "no-such-run", "--root", str(root)]) == 2
    assert "no-such-run" in capsys.readouterr().err
    (root / "empty-run").mkdir(parents=True)
    assert main(["remeasure", str(root / "empty-run")]) == 2
    assert "log.aolog" in capsys.readouterr().err
    run_root = str(real_run.run_dir.parent)
    assert main(["remeasure", real_run.run_id, "--root", run_root, "--problems", "nosuch"]) == 2
    assert "not in run" in capsys.readouterr().err
    assert main(["remeasure", real_run.run_id, "--root", run_root, "--device", "nosuch"]) == 2
    assert "no hardware agent" in capsys.readouterr().err


def test_the_recorded_timeout_is_the_run_s_per_device_one():
    """A run with the default `profiling.timeout_s: null` is re-measured with its device's
    default (the CLI once did float(None)); an explicit one wins; a per-device one applies."""
    from accelopt.config import build_config, recorded_config
    from hardware_agents.families import profile_timeout_s

    recorded = build_config().to_dict()
    default = recorded["profiling"]
    assert default["timeout_s"] is None

    def recorded_timeout(profiling: dict, device: str) -> float:  # what `remeasure` reads of a run
        return profile_timeout_s(device, recorded_config({**recorded, "profiling": profiling}).profiling)

    assert recorded_timeout(default, "cpu") == 60.0  # the CPU family's default
    assert recorded_timeout({**default, "timeout_s": 7}, "cpu") == 7.0
    assert recorded_timeout({**default, "device_timeout_s": {"h100": 250.0}}, "h100") == 250.0
