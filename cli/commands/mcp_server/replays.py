"""replay_run and report_run: a recorded run, agent session or campaign of the server's root,
re-driven and checked as `accelopt replay ID --verify` checks it, or rendered as `accelopt
report ID` renders it (into its own folder). Blocking: the server calls them in a thread.

A log whose decisions the replay does not re-derive is a verdict (`verified: false` and where
they part), not an error; an id the root does not know, or a damaged log, is an error."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from cli.commands.mcp_server.records import ReplayResult, ReportResult


class ReplayError(RuntimeError):
    """The log cannot be read (unknown, damaged); one line."""


def log_source(root: Path, run_id: str) -> str:
    """What the readers take for `run_id`: its exported log under `root` (a path: never a file
    of the server's working folder that happens to bear the name), else the id (its events on
    the root's stream). ReplayError where the root has no such run, session or campaign."""
    from events.runsource import LOG_NAME

    folder = _folder(root, run_id)
    return str(folder / LOG_NAME) if (folder / LOG_NAME).is_file() else run_id


def _folder(root: Path, run_id: str) -> Path:
    """The folder of `run_id` (a name, never a path) under `root`: a run's (or session's),
    else a campaign's."""
    from events.runsource import CAMPAIGNS_DIR
    from events.subjects import check_run_id

    try:
        check_run_id(run_id)
    except ValueError as e:
        raise ReplayError(str(e)) from None
    for folder in (root / run_id, root / CAMPAIGNS_DIR / run_id):
        if folder.is_dir():
            return folder
    raise ReplayError(f"no run, agent session or campaign {run_id!r} under {root}")


def _fold(root: Path, run_id: str, on_event: Any) -> int:
    from events.runsource import LOG_DAMAGE, RunNotFound, fold_events

    try:
        return fold_events(log_source(root, run_id), root, on_event)
    except RunNotFound as e:
        raise ReplayError(str(e)) from None
    except LOG_DAMAGE as e:
        raise ReplayError(f"{run_id}: its log is damaged: {e}") from None


def verify(root: Path, run_id: str) -> ReplayResult:
    """The run's (or the campaign's) decisions re-derived from its recorded inputs; a
    campaign's each of its runs' too: it verifies when its schedule and every run do (as
    `accelopt replay ID --verify`)."""
    from events.runsource import CAMPAIGNS_DIR
    from replay.campaign import CampaignDecider, CampaignView
    from replay.verify import Verifier

    campaign = CampaignView() if _folder(root, run_id).parent.name == CAMPAIGNS_DIR else None
    verifier = Verifier(CampaignDecider) if campaign is not None else Verifier()

    def feed(e: Any) -> bool:
        if campaign is not None:
            campaign.apply(e)  # its runs: verified after its schedule
        return verifier.feed(e)

    _fold(root, run_id, feed)
    try:
        report = verifier.result()
    except ValueError as e:  # no events
        raise ReplayError(f"{run_id}: {e}") from None
    result = ReplayResult(
        run_id=report.run_id or run_id,
        kind="campaign" if campaign is not None else "run",
        verified=report.ok,
        events=report.events,
        decisions_checked=report.decisions_checked,
        inputs=report.inputs,
        divergence=report.divergence.describe() if report.divergence is not None else "",
        pending_at_end=len(report.pending_at_end),
    )
    if campaign is not None and report.ok:
        for run, scheduled in campaign.runs.items():
            why = _run_fails(root, run, scheduled.finished)
            if why is None:
                result.runs_verified += 1
            elif why:
                result.runs_failed.append(f"{run}: {why}")
            else:
                result.runs_without_log += 1
        result.verified = not result.runs_failed
    return result


def _run_fails(root: Path, run_id: str, finished: Any) -> str | None:
    """Why one of a campaign's runs does not verify; None where it does, "" where it has no
    log and needs none (it ended in an error before it began)."""
    from events.runsource import LOG_DAMAGE, RunNotFound, fold_events
    from replay.verify import Verifier

    v = Verifier()
    try:
        fold_events(log_source(root, run_id), root, v.feed)
        r = v.result()
    except (ReplayError, RunNotFound):
        return "" if finished is None or finished.status == "error" else "its log is missing"
    except (*LOG_DAMAGE, ValueError) as e:
        return str(e)
    return r.divergence.describe() if r.divergence is not None else None


def report(root: Path, run_id: str) -> ReportResult:
    """The run's (or campaign's) HTML report, written to `<root>/<run>/report.html` (a
    campaign's, `<root>/campaigns/<id>/report.html`)."""
    from events.runsource import LOG_DAMAGE, RunNotFound
    from replay.runs import RunListing, open_run
    from replay.states import run_driver
    from replay.summary import summarize

    try:
        view, source = open_run(log_source(root, run_id), root)
    except RunNotFound as e:
        raise ReplayError(str(e)) from None
    except LOG_DAMAGE as e:
        raise ReplayError(f"{run_id}: its log is damaged: {e}") from None
    if view.started is None:
        return _campaign_report(root, run_id)
    from replay.render.report import build_report

    listing = RunListing(
        summarize(view), "file" if source else "stream", driver=run_driver(root, run_id), root=str(root)
    )
    state = listing.state()
    html = build_report([view], states=[state])
    out = (source.parent if source is not None else root / run_id) / "report.html"
    return _write(out, html, run_id=run_id, kind="run", events=view.events, state=state.label)


def _campaign_report(root: Path, campaign_id: str) -> ReportResult:
    from events.runsource import LOG_NAME, RunNotFound
    from replay.campaign import campaign_dir, load_campaign
    from replay.render.campaign import build_campaign_report
    from replay.states import campaign_driver, campaign_state

    try:
        view = load_campaign(log_source(root, campaign_id), root)
    except RunNotFound as e:
        raise ReplayError(str(e)) from None
    folder = campaign_dir(root, campaign_id)
    source = "file" if (folder / LOG_NAME).is_file() else "stream"
    state = campaign_state(view, campaign_driver(root, campaign_id), source=source, root=str(root))
    html = build_campaign_report(view, state)
    return _write(
        folder / "report.html",
        html,
        run_id=campaign_id,
        kind="campaign",
        events=view.events,
        state=state.label,
    )


def _write(out: Path, html: str, **fields: Any) -> ReportResult:
    data = html.encode()
    out.write_bytes(data)
    return ReportResult(path=str(out), size_bytes=len(data), **fields)
