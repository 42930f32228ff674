"""Retrieval helpers: the query text, filters, device families, ranking, near-duplicate
collapse, the slow -> fast diff and the prompt block."""

from __future__ import annotations

import difflib
import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import msgspec
import numpy as np

from accelopt.catalog import RetrievedInsight
from accelopt.records import is_estimated
from memory_index.schema import humanize, sql_in, sql_str

DEFAULT_TOP_M = 16
DUPLICATE_COSINE = 0.95
"""Two retrieved insights whose embeddings are closer than this count as one."""

MAX_DIFF_LINES = 80
MAX_DIFF_CHARS = 4000


def device_family(device: str) -> tuple[str, ...]:
    """The device kinds of `device`'s family (`hardware_agents.families`: same memory hierarchy
    and kernel language, so insights transfer as they are; retrieval stays within a family
    unless cross-device slots are asked for). A kind no family serves is a family of its own."""
    from hardware_agents.families import family_of

    family = family_of(device)
    return family.kind_names() if family is not None else (device,)


def planner_sees(
    *,
    device: str,
    language: str,
    op_type: str,
    entry_device: str,
    entry_language: str,
    entry_op_type: str,
    cross_device_share: float = 0.0,
    same_device_only: bool = False,
) -> bool:
    """Whether a planner of a problem of `op_type` in `language` on `device` may be shown an
    insight learnt on (`entry_device`, `entry_language`, `entry_op_type`): the one rule that
    `planner_insights` (`MemoryIndex.retrieve`) fills its slots by and the campaign scheduler
    counts new insights by. Its own chip's insights: same kernel language and device family
    (`device_family`; only `device` itself with `same_device_only`), any operator. Another chip's (another
    language or family): only with `cross_device_share` > 0, and only of the same operator:
    its constants and code are another language's, so only an insight about the same
    computation says something the planner can carry over."""
    if same_device_only:
        return entry_device == device and entry_language == language
    if entry_language == language and entry_device in device_family(device):
        return True
    return cross_device_share > 0 and bool(op_type) and entry_op_type == op_type


def planner_insights(
    search: Callable[[SearchQuery], list[RetrievedInsight]],
    base: SearchQuery,
    *,
    device: str,
    language: str,
    op_type: str,
    top_m: int,
    cross_device_share: float = 0.0,
    same_device_only: bool = False,
) -> list[RetrievedInsight]:
    """A planner's insights (`MemoryIndex.retrieve`), its slots filled as `planner_sees` rules:
    `top_m` slots from the same kernel language and device family (`device_family`; only
    `device` itself with `same_device_only`), of which a share of `cross_device_share` (rounded,
    at least 1 when > 0) is given to the best insights of other chips (another language or
    family) about the same operator, `op_type` (slots they do not fill stay with the own
    chip's). Each part is what `search` finds for `base` (its ranking and exclusions) narrowed."""
    cross = 0 if same_device_only or cross_device_share <= 0 else max(1, round(top_m * cross_device_share))
    cross = min(cross, top_m)
    others = (
        search(
            msgspec.structs.replace(
                base, top_m=cross, op_type=op_type, other_chip_than=(language, device_family(device))
            )
        )
        if cross
        else []
    )
    # slots another chip does not fill stay the planner's own chip's
    family = [device] if same_device_only else list(device_family(device))
    own = (
        search(msgspec.structs.replace(base, top_m=top_m - len(others), device=family, language=language))
        if top_m > len(others)
        else []
    )
    return own + others


def from_another_chip(
    device: str | None, language: str | None, entry_device: str, entry_language: str
) -> bool:
    """An insight learnt in another kernel language or on another device family than the
    planner's (False where the planner's device or language is not known)."""
    if device is None or language is None:
        return False
    return entry_language != language or entry_device not in device_family(device)


def kernel_diff(
    slow: str, fast: str, *, max_lines: int = MAX_DIFF_LINES, max_chars: int = MAX_DIFF_CHARS
) -> str:
    """The unified diff slow -> fast, changed hunks only (2 lines of context). Bounded by
    whole hunks: the hunks that fit are kept and the rest counted, so the model never sees
    code cut in the middle. "" when the kernels are equal or empty."""
    if not slow.strip() or not fast.strip():
        return ""
    lines = list(difflib.unified_diff(slow.splitlines(), fast.splitlines(), "slow", "fast", n=2, lineterm=""))
    if not lines:
        return ""
    hunks: list[list[str]] = []
    for line in lines[2:]:  # after the ---/+++ header
        if line.startswith("@@"):
            hunks.append([])
        if hunks:
            hunks[-1].append(line)
    kept: list[str] = lines[:2]
    omitted = 0
    for hunk in hunks:
        if (
            omitted
            or len(kept) + len(hunk) > max_lines
            or sum(map(len, kept + hunk)) + len(kept + hunk) > max_chars
        ):
            omitted += 1
            continue
        kept += hunk
    if len(kept) == 2:  # not even the first hunk fits
        return f"(the fast kernel rewrites the slow one: {len(hunks)} changed hunks, too large to show)"
    if omitted:
        kept.append(f"... ({omitted} more changed hunk{'s' if omitted > 1 else ''} not shown)")
    return "\n".join(kept)


def blended_rank(
    similarity: Sequence[float],
    speedup: Sequence[float],
    created_at: Sequence[float],
    *,
    speedup_weight: float,
    recency_weight: float,
) -> list[int]:
    """Candidate order, best first: cosine similarity, plus `speedup_weight` x the measured
    speedup on a log2 scale clamped to [-1, 1] (a 2x gain +1, a 2x slowdown -1), plus
    `recency_weight` x the entry's place in the candidates' creation order (newest 1, oldest 0,
    evenly spaced by rank). Ranks, not timestamps: the same entries written in the same order
    rank the same whatever the wall-clock gaps between them (a replay or an ablation of a run
    writes them at other times). Ties keep the similarity order."""
    n = len(similarity)
    by_age = sorted(range(n), key=lambda i: (created_at[i], i))
    place = {i: (r / (n - 1) if n > 1 else 1.0) for r, i in enumerate(by_age)}
    # entries created at the same instant share the place of the newest of them
    for r in range(n - 2, -1, -1):
        if created_at[by_age[r]] == created_at[by_age[r + 1]]:
            place[by_age[r]] = place[by_age[r + 1]]

    def score(i: int) -> float:
        gain = max(-1.0, min(1.0, math.log2(speedup[i]))) if speedup[i] > 0 else -1.0
        return similarity[i] + speedup_weight * gain + recency_weight * place[i]

    return sorted(range(len(similarity)), key=lambda i: (-score(i), i))


def query_for(
    problem: str,
    op_type: str,
    device: str | None = None,
    language: str | None = None,
    kernel_source_or_plan: str = "",
    *,
    max_context_chars: int = 1200,
) -> str:
    """The retrieval query for a planner call: operator and problem, then some context.

    Shaped like the embedded entries (see `schema.embed_text`), so similarity is driven by
    the operator and what the kernel does. `device` and `language` are accepted for the
    call site's convenience but are not part of the text: they are filters, and leaving
    them out lets insights cross devices. The context (candidate kernel or plan) is cut to
    `max_context_chars`; the embedding model only reads its first ~256 word pieces anyway.
    """
    head = humanize(op_type)
    name = humanize(problem)
    if name and name != head:
        head = f"{head}: {name}" if head else name
    context = kernel_source_or_plan.strip()[:max_context_chars]
    return f"{head}\n{context}" if context else head


@dataclass(frozen=True)
class Filters:
    """Optional filters of a search or listing; None means any. Lists mean 'any of'."""

    device: str | Sequence[str] | None = None
    language: str | Sequence[str] | None = None
    op_type: str | Sequence[str] | None = None
    problem: str | Sequence[str] | None = None
    min_speedup: float | None = None
    exclude_problem: str | None = None
    include_noop: bool = False
    # entries of these runs are left out unless their id is in `allow_ids` (a run's own
    # lineage: what it has not emitted yet is its future)
    exclude_source_runs: Sequence[str] | None = None
    allow_ids: Sequence[str] | None = None
    # entries of another chip than this (language, device family) only
    other_chip_than: tuple[str, Sequence[str]] | None = None

    def where(self) -> str | None:
        parts: list[str] = []
        for column in ("device", "language", "op_type", "problem"):
            value = getattr(self, column)
            if value is None:
                continue
            parts.append(sql_in(column, [value] if isinstance(value, str) else value))
        if self.min_speedup is not None:
            parts.append(f"speedup >= {float(self.min_speedup)!r}")
        if self.exclude_problem is not None:
            parts.append(f"problem != {sql_str(self.exclude_problem)}")
        if not self.include_noop:
            parts.append("noop = false")
        if self.other_chip_than is not None:
            language, family = self.other_chip_than
            parts.append(f"NOT (language = {sql_str(language)} AND {sql_in('device', list(family))})")
        if self.exclude_source_runs:
            runs = f"NOT ({sql_in('source_run', list(self.exclude_source_runs))})"
            parts.append(f"({runs} OR {sql_in('id', list(self.allow_ids))})" if self.allow_ids else runs)
        return " AND ".join(parts) if parts else None


class SearchQuery(msgspec.Struct, kw_only=True, frozen=True):
    """What a search asks for besides its text (or vector): how many insights, from which
    entries, ranked how (`MemoryIndex.search`). None means any; a list means any of."""

    top_m: int = DEFAULT_TOP_M
    # the candidates (a prefilter: `Filters`)
    device: str | Sequence[str] | None = None
    language: str | Sequence[str] | None = None
    op_type: str | Sequence[str] | None = None
    min_speedup: float | None = None
    exclude_problem: str | None = None
    # entries of these runs are left out unless their id is in `allow_ids` (a run's lineage)
    exclude_source_runs: Sequence[str] | None = None
    allow_ids: Sequence[str] | None = None
    # entries of another chip than this (language, device family) only
    other_chip_than: tuple[str, Sequence[str]] | None = None
    # the ranking (`blended_rank`; both 0: similarity alone) and near-duplicates collapsed to
    # the best-ranked (same normalized title, or embeddings with cosine > `duplicate_cosine`)
    speedup_weight: float = 0.0
    recency_weight: float = 0.0
    collapse: bool = True
    duplicate_cosine: float = DUPLICATE_COSINE
    # the vector index's search (None: LanceDB's defaults)
    nprobes: int | None = None
    refine_factor: int | None = None

    def filters(self) -> Filters:
        return Filters(
            device=self.device,
            language=self.language,
            op_type=self.op_type,
            min_speedup=self.min_speedup,
            exclude_problem=self.exclude_problem,
            exclude_source_runs=self.exclude_source_runs,
            allow_ids=self.allow_ids,
            other_chip_than=self.other_chip_than,
        )

    @property
    def blended(self) -> bool:
        """Ranked by more than similarity."""
        return self.speedup_weight != 0.0 or self.recency_weight != 0.0

    @property
    def fetch(self) -> int:
        """How many nearest candidates to fetch: more than `top_m` where collapsing or
        re-ranking may pass over some, so `top_m` distinct insights come back when they exist."""
        return self.top_m * 3 + 8 if self.collapse or self.blended else self.top_m


def normalize_title(title: str) -> str:
    t = re.sub(r"[*_`#]+", " ", title.lower())
    t = re.sub(r"[^a-z0-9]+", " ", t)
    return " ".join(t.split())


def collapse_near_duplicates(
    titles: Sequence[str],
    vectors: np.ndarray,
    *,
    threshold: float = DUPLICATE_COSINE,
    limit: int | None = None,
) -> list[int]:
    """Indexes of the results to keep, in order: greedy, best first.

    A result is dropped when its normalized title equals a kept one's, or its embedding's
    cosine similarity to a kept one exceeds `threshold` (vectors are unit length).
    """
    kept: list[int] = []
    seen_titles: set[str] = set()
    for i, title in enumerate(titles):
        key = normalize_title(title)
        if key and key in seen_titles:
            continue
        if kept and float(np.max(vectors[kept] @ vectors[i])) > threshold:
            continue
        kept.append(i)
        if key:
            seen_titles.add(key)
        if limit is not None and len(kept) >= limit:
            break
    return kept


def _strip_title(title: str) -> str:
    return title.strip().strip("*").strip() or "(untitled insight)"


_FENCED = re.compile(r"^[ \t]*(`{3,}|~{3,})[^\n]*\n.*?^[ \t]*\1[ \t]*$", re.MULTILINE | re.DOTALL)
_OPEN_FENCE = re.compile(r"^[ \t]*(`{3,}|~{3,})", re.MULTILINE)


def _body(title: str, text: str, max_chars: int | None) -> str:
    """The insight's text without its repeated title, bounded without cutting code: past
    `max_chars` its code blocks give way to a note (the diff shows the change), then the
    prose is cut at a paragraph or line break."""
    body = text.strip()
    first, _, rest = body.partition("\n")
    if normalize_title(first) == normalize_title(title):  # the summary repeats its title line
        body = rest.strip()
    if max_chars is None or len(body) <= max_chars:
        return body
    body = _FENCED.sub("[code not shown: see the diff]", body)
    m = _OPEN_FENCE.search(body)  # a block left open by a truncated summary: drop it to the end
    if m is not None:
        body = body[: m.start()].rstrip() + "\n[code not shown: see the diff]"
    if len(body) <= max_chars:
        return body
    cut = body.rfind("\n\n", 0, max_chars)
    if cut < max_chars // 2:
        cut = body.rfind("\n", 0, max_chars)
    if cut < max_chars // 2:
        cut = body.rfind(" ", 0, max_chars)
    return body[: max(cut, 1)].rstrip() + "\n[...]"


def format_for_prompt(
    entries: Sequence[RetrievedInsight],
    *,
    heading: str = "# Experiences",
    max_chars_per_insight: int | None = 1500,
    device: str | None = None,
    language: str | None = None,
) -> str:
    """The planner's memory block: each insight with the problem, device, language and speedup
    it was measured on, its text (bounded, see `_body`) and the slow -> fast diff it was
    distilled from (changed hunks, `kernel_diff`). Given the planner's `device` and
    `language`, an insight of another chip says so (`from_another_chip`): its names and code
    are another language's. Returns "" when there is nothing to show."""
    if not entries:
        return ""
    lines = [
        heading,
        "",
        "Optimization insights from earlier runs, retrieved by similarity to this problem. Each "
        "says which problem, device and kernel language it was measured on and the speedup it "
        "gave there; an insight from another device or language may still apply once adapted.",
    ]
    for i, e in enumerate(entries, 1):
        gain = (
            f"{e.speedup:.2f}x faster"
            if e.speedup >= 1.0
            else f"{e.speedup:.2f}x (a slowdown: avoid this change)"
        )
        how = "Estimated (by a cost model, not measured)" if is_estimated(e.text) else "Measured"
        lines += ["", f"## {i}. **{_strip_title(e.title)}**"]
        if from_another_chip(device, language, e.device, e.language):
            lines.append(
                f"From another chip: learnt in {e.language} on {e.device}, not in {language} on "
                f"{device}. Its constants and code are that kernel's: carry the idea over, not the names."
            )
        lines.append(f"{how} on `{e.problem}`, device {e.device}, language {e.language}: {gain}.")
        body = _body(e.title, e.text, max_chars_per_insight)
        if body:
            lines += ["", body]
        if e.diff:
            lines += ["", "The change, slow -> fast:", "```diff", e.diff, "```"]
    return "\n".join(lines) + "\n"
