"""Plans and insights as people read them: LLM-written markdown rendered to safe HTML (the
report and the dashboard), and one-line titles as plain text (tables).

Rendering is CommonMark (markdown-it-py) with raw HTML off, so a model's reply cannot put
markup or scripts on the page: every `<` it writes is escaped, and links with a script
scheme are not links.
"""

from __future__ import annotations

import functools
import re

from markdown_it import MarkdownIt

_INLINE_MARKS = re.compile(r"(\*\*|__|`+)(?=\S)(.+?)(?<=\S)\1")
_EMPHASIS = re.compile(r"(?<![\w*])\*(?=\S)([^*]+?)(?<=\S)\*(?![\w*])")


@functools.cache
def _parser() -> MarkdownIt:
    # a line break in a plan is meant (plans are line-oriented): breaks=True keeps it
    return MarkdownIt("commonmark", {"html": False, "linkify": False, "typographer": False, "breaks": True})


def to_html(text: str) -> str:
    """`text` (markdown) as HTML; raw HTML in it is shown as text."""
    return _parser().render(text or "").strip()


def plain(text: str) -> str:
    """One line of markdown as plain text: emphasis and code marks dropped, the words kept."""
    for _ in range(4):  # nested marks, outermost first: **`X`**
        stripped = _EMPHASIS.sub(r"\1", _INLINE_MARKS.sub(r"\2", text))
        if stripped == text:
            break
        text = stripped
    return text


def title(text: str | None, limit: int = 160) -> str:
    """The first non-empty line of a plan or insight as plain text (headings, list markers
    and emphasis dropped)."""
    for line in (text or "").splitlines():
        line = re.sub(r"^\s*(?:#+|[-*+]\s|\d+[.)]\s)\s*", "", line).strip()
        line = plain(line).strip().strip("*_").strip()
        if line:
            return line[:limit]
    return ""
