"""Retrieval helpers: the query text, filters, near-duplicate collapse and the prompt block."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from events.catalog import RetrievedInsight
from memory_index.schema import humanize, sql_in, sql_str

DEFAULT_TOP_M = 16
DUPLICATE_COSINE = 0.95
"""Two retrieved insights whose embeddings are closer than this count as one."""


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
        return " AND ".join(parts) if parts else None


def normalize_title(title: str) -> str:
    t = re.sub(r"[*_`#]+", " ", title.lower())
    t = re.sub(r"[^a-z0-9]+", " ", t)
    return " ".join(t.split())


def collapse_near_duplicates(
    titles: Sequence[str], vectors: np.ndarray, *, threshold: float = DUPLICATE_COSINE, limit: int | None = None
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


def _body(title: str, text: str, max_chars: int | None) -> str:
    body = text.strip()
    first, _, rest = body.partition("\n")
    if normalize_title(first) == normalize_title(title):  # the summary repeats its title line
        body = rest.strip()
    if max_chars is not None and len(body) > max_chars:
        body = body[:max_chars].rstrip() + "\n[...]"
    return body


def format_for_prompt(
    entries: Sequence[RetrievedInsight],
    *,
    heading: str = "# Experiences",
    max_chars_per_insight: int | None = 1500,
) -> str:
    """The planner's memory block: each insight with the problem, device, language and speedup
    it was measured on. Returns "" when there is nothing to show (no section at all)."""
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
        if e.speedup >= 1.0:
            gain = f"{e.speedup:.2f}x faster"
        else:
            gain = f"{e.speedup:.2f}x (a slowdown: avoid this change)"
        lines += [
            "",
            f"## {i}. **{_strip_title(e.title)}**",
            f"Measured on `{e.problem}`, device {e.device}, language {e.language}: {gain}.",
        ]
        body = _body(e.title, e.text, max_chars_per_insight)
        if body:
            lines += ["", body]
    return "\n".join(lines) + "\n"
