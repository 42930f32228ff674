"""`accelopt report`: by run id under the root, by log file, several runs with --out, the state
at an iteration, and a clear error for an unknown run."""

from __future__ import annotations

from cli.main import main
from replay.render import fmt


def test_report_by_run_id_goes_into_the_run_dir(real_run, parse_html, capsys):
    root = real_run.run_dir.parent
    assert main(["report", real_run.run_id, "--root", str(root)]) == 0
    out = real_run.run_dir / "report.html"
    assert str(out) in capsys.readouterr().out
    doc = parse_html(out.read_text())
    assert real_run.run_id in doc.find("title").text()
    r = real_run.view.results()[0]
    assert fmt.speedup(r.speedup) in doc.find("table", cls="results").text()


def test_two_runs_and_an_iteration(real_run, synthetic, export_log, tmp_path, parse_html):
    log = export_log(synthetic(run_id="other-run", problems=1), tmp_path / "other.aolog")
    out = tmp_path / "cmp" / "both.html"
    assert main(["report", str(real_run.run_dir), str(log), "--out", str(out), "--iteration", "1"]) == 0
    doc = parse_html(out.read_text())
    labels = [row[0] for row in doc.find("table", cls="runs").rows()[1:]]
    assert labels == [f"{real_run.run_id} @ iteration 1", "other-run @ iteration 1"]
    assert doc.find("section", id="comparison")
    iterations = doc.find("table", cls="iterations", data_run=real_run.run_id).rows()[1:]
    assert [row[0] for row in iterations] == ["0", "1"]


def test_unknown_run(tmp_path, capsys):
    root = tmp_path / "empty-root"
    assert main(["report", "no-such-run", "--root", str(root)]) == 2
    assert "no-such-run" in capsys.readouterr().err
    assert not (root / ".nats").exists(), "no server is started for a root that never had one"
