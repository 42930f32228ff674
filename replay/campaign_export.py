"""What a user takes away from a campaign (`accelopt campaign export`):

- `kernels/<suite>/<problem>@<device><ext>`: the best kernel of every item in its native form
  (a C file, an NKI file, ...; a kernel in a FlashInfer-Bench language also as
  `<problem>@<device>.solution.json`, a FlashInfer-Bench Solution), read from the run that
  found it (an item no run improved: the baseline its runs started from);
- `pairs.parquet`: one row per entry of the campaign's memory (every entry: the row count
  is the memory's), the slow and fast kernels with their ids, the insight (title, text), the
  speedup, and each kernel's profile in the run that learnt it (status, latency or estimate,
  % of peak, and the whole Profile as JSON), joined from that run's log where it is under
  the root (null where it is not: an entry another campaign's run added from elsewhere);

Every kernel id written is the kernel's content id (`accelopt.kernel_id`), computed from the
source written beside it, so one id is one source across the whole export, whichever runs and
memories it comes from: a run recorded before kernels were content-addressed named its
kernels otherwise, and its profiles are joined through `RunFacts.content_id`.
- `manifest.json`: what was written, and why anything was left out.

The Parquet file is plain Parquet written by pyarrow (flat columns; a profile as a JSON
string), the format `pandas.read_parquet` and `datasets.load_dataset("parquet", ...)` read.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import msgspec

from accelopt import catalog as ev
from accelopt.kernel_id import kernel_id
from accelopt.problem import FLASHINFER_LANGUAGES, Problem, SourceFile
from accelopt.profile import Profile
from events.runsource import RunNotFound, load_events
from replay.campaign import FIGURES_NOTE, CampaignView, figure_how, figure_label

PAIRS_FILE = "pairs.parquet"


class RunFacts:
    """What the export needs of one run's log: its problems, its kernels' sources and
    profiles, and which kernels each of its memory entries pairs."""

    def __init__(self, events: list[ev.Event]) -> None:
        self.problems: dict[str, Problem] = {}
        self.sources: dict[str, str] = {}  # kernel id as the run recorded it -> source
        # kernel id as the run recorded it -> the kernel's content id: the same id in a run that
        # named its kernels by content; a run recorded before that named them by request (and
        # named one source proposed twice twice), so its ids are mapped here on read
        self.content_id: dict[str, str] = {}
        self.profiles: dict[str, Profile] = {}  # content id -> its search profile in this run
        self.summaries: dict[str, ev.SummaryRequested] = {}  # request id -> request
        self.insight_request: dict[str, str] = {}  # InsightSummarized id -> its request id
        self.entry_pair: dict[str, ev.SummaryRequested] = {}  # memory entry id -> the pair it records
        for e in events:
            if isinstance(e, ev.RunStarted):
                self.problems = {t.problem.name: t.problem for t in e.targets}
            elif isinstance(e, ev.KernelProposed):
                self.sources.setdefault(e.kernel_id, e.source)
                self.content_id.setdefault(e.kernel_id, kernel_id(e.problem, e.language, e.source))
            elif isinstance(e, ev.KernelProfiled) and e.kernel_id in self.content_id:
                # the kernel's first profile: its search profile (a re-measure comes later)
                self.profiles.setdefault(self.content_id[e.kernel_id], e.profile)
            elif isinstance(e, ev.SummaryRequested):
                self.summaries[e.event_id] = e
            elif isinstance(e, ev.InsightSummarized):
                self.insight_request[e.event_id] = e.request_id
            elif isinstance(e, ev.MemoryEntryAdded):
                req = self.summaries.get(self.insight_request.get(e.causation_id or "", ""))
                if req is not None:
                    self.entry_pair[e.entry.id] = req


class _Runs:
    """Run logs read once each (under the root, else on the stream)."""

    def __init__(self, root: str | Path, nats_url: str | None) -> None:
        self.root, self.nats_url = root, nats_url
        self.cache: dict[str, RunFacts | None] = {}

    def get(self, run_id: str) -> RunFacts | None:
        if run_id not in self.cache:
            try:
                events = load_events(run_id, self.root, nats_url=self.nats_url, start_server=False)
                self.cache[run_id] = RunFacts(events)
            except (RunNotFound, OSError, ValueError):
                self.cache[run_id] = None
        return self.cache[run_id]


def export_campaign(
    view: CampaignView, root: str | Path, out: Path, *, nats_url: str | None = None
) -> dict[str, Any]:
    out.mkdir(parents=True, exist_ok=True)
    runs = _Runs(root, nats_url)
    warnings: list[str] = []
    kernels = export_kernels(view, runs, out, warnings)
    pairs = export_pairs(view, runs, out / PAIRS_FILE, warnings)
    manifest = {
        "campaign_id": view.campaign_id,
        "figures_note": FIGURES_NOTE,
        "kernels": kernels,
        "pairs": pairs,
        "warnings": warnings,
    }
    (out / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n")
    return manifest


# --- the best kernels ----------------------------------------------------------------------------


def export_kernels(view: CampaignView, runs: _Runs, out: Path, warnings: list[str]) -> list[dict[str, Any]]:
    from hardware_agents.languages import find_language

    written = []
    for key, it in view.items.items():
        run_id = it.best_run or next(
            (r.scheduled.run for r in view.runs.values() if r.scheduled.item == key), None
        )
        facts = runs.get(run_id) if run_id else None
        problem = facts.problems.get(it.item.problem) if facts else None
        if facts is None or problem is None:
            warnings.append(f"{key}: no run of it has a log under the root: no kernel to export")
            continue
        # a run's baseline is the kernel it started from: the item's best where no run beat it
        source = (
            facts.sources.get(it.best_kernel or "") if it.best_run else problem.baseline.entry_file().content
        )
        if source is None:
            warnings.append(f"{key}: kernel {it.best_kernel} is not in {run_id}'s log")
            continue
        lang = find_language(it.item.language)
        folder = out / "kernels" / it.item.suite.replace("/", "_")
        folder.mkdir(parents=True, exist_ok=True)
        stem = f"{it.item.problem}@{it.item.device}"
        path = folder / f"{stem}{lang.extension if lang else '.txt'}"
        path.write_text(source)
        files = [str(path.relative_to(out))]
        if it.item.language in FLASHINFER_LANGUAGES:
            solution = _solution(problem, source, f"{it.item.problem}_accelopt_{view.campaign_id}")
            sol_path = folder / f"{stem}.solution.json"
            sol_path.write_bytes(msgspec.json.format(msgspec.json.encode(solution), indent=2) + b"\n")
            files.append(str(sol_path.relative_to(out)))
        written.append(
            {
                "item": key,
                "language": it.item.language,
                "files": files,
                "run": run_id,
                "kernel_id": kernel_id(it.item.problem, it.item.language, source),
                "improved": it.best_run is not None,
                "speedup": it.speedup,
                "estimated": it.estimated,
                "pct_peak": it.pct_peak,
                "figures": figure_label(it, view.item_figures),
                "figures_how": figure_how(it, view.item_figures),
                "measured_run": it.measured_run,
            }
        )
    return written


def _solution(problem: Problem, source: str, name: str) -> Any:
    base = problem.baseline
    entry = base.entry_file()
    sources = [SourceFile(path=f.path, content=source) if f is entry else f for f in base.sources]
    return msgspec.structs.replace(base, name=name, author="accelopt", sources=sources)


# --- the memory's pairs ---------------------------------------------------------------------------


def export_pairs(view: CampaignView, runs: _Runs, path: Path, warnings: list[str]) -> dict[str, Any]:
    import pyarrow as pa
    import pyarrow.parquet as pq

    from accelopt.records import is_estimated
    from memory_index import MemoryIndex
    from memory_index.schema import is_noop

    assert view.started is not None
    index = MemoryIndex.open(view.started.memory_uri, read_consistency_s=None)
    suites = {(it.item.problem, it.item.device): it.item.suite for it in view.items.values()}
    ours = set(view.runs)
    rows: list[dict[str, Any]] = []
    unjoined = 0
    for entry in index.iter_entries():
        facts = runs.get(entry.source_run)
        pair = facts.entry_pair.get(entry.id) if facts else None
        slow = _profile_columns("slow", facts, entry.slow_kernel_id)
        fast = _profile_columns("fast", facts, entry.fast_kernel_id)
        if slow["slow_profile"] is None and fast["fast_profile"] is None:
            unjoined += 1
        rows.append(
            {
                "id": entry.id,
                "source_run": entry.source_run,
                "campaign_run": entry.source_run in ours,
                "suite": suites.get((entry.problem, entry.device)),
                "problem": entry.problem,
                "op_type": entry.op_type,
                "device": entry.device,
                "language": entry.language,
                "positive": entry.positive,
                "noop": is_noop(entry.title, entry.text),
                "estimated": is_estimated(entry.text),
                "speedup": entry.speedup,
                "title": entry.title,
                "insight": entry.text,
                "created_at": entry.created_at,
                "iteration": pair.iteration if pair else None,
                "slow_kernel": entry.slow_kernel,
                "fast_kernel": entry.fast_kernel,
                **slow,
                **fast,
            }
        )
    if unjoined:
        warnings.append(
            f"{unjoined} of {len(rows)} memory entries have no profiles: the runs that learnt them are not "
            "under this root (their profile columns are null)"
        )
    table = pa.Table.from_pylist(rows, schema=pairs_schema())
    pq.write_table(table, path)
    return {
        "file": path.name,
        "rows": len(rows),
        "memory_uri": view.started.memory_uri,
        "columns": table.column_names,
    }


def _profile_columns(side: str, facts: RunFacts | None, content_id: str) -> dict[str, Any]:
    prof = facts.profiles.get(content_id) if facts else None
    return {
        f"{side}_kernel_id": content_id,
        f"{side}_status": prof.status if prof else None,
        f"{side}_latency_ms": prof.latency_ms if prof else None,
        f"{side}_estimated_ms": prof.estimated_ms if prof else None,
        f"{side}_pct_peak": (prof.peak_fraction if prof.peak_fraction is not None else _est_pct(prof))
        if prof
        else None,
        f"{side}_profile": msgspec.json.encode(prof).decode() if prof else None,
    }


def _est_pct(prof: Profile) -> float | None:
    return prof.estimate.peak_fraction if prof.estimate is not None else None


def pairs_schema() -> Any:
    """The columns of `pairs.parquet`."""
    import pyarrow as pa

    s, f, b, i = pa.string(), pa.float64(), pa.bool_(), pa.int64()
    fields = [
        ("id", s),
        ("source_run", s),
        ("campaign_run", b),
        ("suite", s),
        ("problem", s),
        ("op_type", s),
        ("device", s),
        ("language", s),
        ("positive", b),
        ("noop", b),
        ("estimated", b),
        ("speedup", f),
        ("title", s),
        ("insight", s),
        ("created_at", f),
        ("iteration", i),
        ("slow_kernel", s),
        ("fast_kernel", s),
    ]
    for side in ("slow", "fast"):
        fields += [
            (f"{side}_kernel_id", s),
            (f"{side}_status", s),
            (f"{side}_latency_ms", f),
            (f"{side}_estimated_ms", f),
            (f"{side}_pct_peak", f),
            (f"{side}_profile", s),
        ]
    return pa.schema(fields)
