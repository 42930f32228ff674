"""HTML building blocks for reports: escaping, tables, source diffs, the inline stylesheet."""

from __future__ import annotations

import difflib
import time
from collections.abc import Iterable, Sequence
from html import escape

from replay.render import fmt

Cell = str | tuple[str, str]  # text, or (text, css class); text is escaped


def esc(x: object) -> str:
    return escape(str(x), quote=True)


def wrappable_header(text: str) -> str:
    """A column header that may break after an underscore: status names such as
    `timing_mismatch` are single words a header could not otherwise wrap, and a table
    with a column for each of them would be wider than the page."""
    return esc(text).replace("_", "_<wbr>")


def table(
    headers: Sequence[str],
    rows: Iterable[Sequence[Cell]],
    *,
    cls: str = "",
    attrs: str = "",
    numeric_from: int = 1,
) -> str:
    """A table; columns from `numeric_from` on are right-aligned; headers wrap, after
    underscores too. In a box that scrolls sideways where a table is wider than the page
    (many runs side by side), never the page."""
    out = [f'<div class="table-wrap"><table class="{esc(cls)}"{" " + attrs if attrs else ""}><thead><tr>']
    out += [
        f"<th{' class=num' if i >= numeric_from else ''}>{wrappable_header(h)}</th>"
        for i, h in enumerate(headers)
    ]
    out.append("</tr></thead><tbody>")
    for row in rows:
        out.append("<tr>")
        for i, cell in enumerate(row):
            text, extra = cell if isinstance(cell, tuple) else (cell, "")
            classes = " ".join(c for c in ("num" if i >= numeric_from else "", extra) if c)
            out.append(f"<td{f' class={chr(34)}{classes}{chr(34)}' if classes else ''}>{esc(text)}</td>")
        out.append("</tr>")
    out.append("</tbody></table></div>")
    return "".join(out)


def source_diff(
    before: str, after: str, *, name_before: str = "before", name_after: str = "after", context: int = 3
) -> str:
    """A unified diff as `<pre class="diff">`, one span per line classed add/del/hunk/ctx."""
    lines = list(
        difflib.unified_diff(
            before.splitlines(), after.splitlines(), name_before, name_after, n=context, lineterm=""
        )
    )
    if not lines:
        return '<pre class="diff"><span class="ctx">(identical source)</span></pre>'
    out = ['<pre class="diff">']
    for line in lines:
        if line.startswith(("+++", "---")):
            cls = "file"
        elif line.startswith("@@"):
            cls = "hunk"
        elif line.startswith("+"):
            cls = "add"
        elif line.startswith("-"):
            cls = "del"
        else:
            cls = "ctx"
        out.append(f'<span class="{cls}">{esc(line)}</span>')  # block spans: no newline between
    out.append("</pre>")
    return "".join(out)


def diff_stats(before: str, after: str) -> tuple[int, int]:
    """Lines added and removed."""
    added = removed = 0
    for line in difflib.unified_diff(before.splitlines(), after.splitlines(), n=0, lineterm=""):
        if line.startswith(("+++", "---")):
            continue
        if line.startswith("+"):
            added += 1
        elif line.startswith("-"):
            removed += 1
    return added, removed


CSS = """
:root { --fg:#1d2330; --muted:#5d6575; --line:#d9dde5; --bg:#ffffff; --soft:#f5f7fa; --accent:#1f77b4;
        --good:#1a7f37; --bad:#c62828; }
* { box-sizing: border-box; }
body { font: 14px/1.45 -apple-system, "Segoe UI", Roboto, Helvetica, Arial, sans-serif; color: var(--fg);
       background: var(--bg); margin: 0 auto; padding: 24px 32px 64px; max-width: 1280px; }
h1 { font-size: 24px; margin: 0 0 4px; }
h2 { font-size: 19px; margin: 36px 0 10px; border-bottom: 2px solid var(--line); padding-bottom: 4px; }
h3 { font-size: 16px; margin: 22px 0 8px; } h4 { font-size: 14px; margin: 14px 0 6px; }
.sub { color: var(--muted); margin: 0 0 16px; }
nav a { margin-right: 14px; color: var(--accent); text-decoration: none; }
table { border-collapse: collapse; margin: 8px 0 16px; font-size: 13px; }
th, td { border-bottom: 1px solid var(--line); padding: 4px 10px; text-align: left; vertical-align: top; }
th { background: var(--soft); font-weight: 600; }
td.num, th.num { text-align: right; font-variant-numeric: tabular-nums; } td.num { white-space: nowrap; }
td.good { color: var(--good); font-weight: 600; } td.bad { color: var(--bad); font-weight: 600; }
tr.total td { font-weight: 600; border-top: 2px solid var(--line); }
code, pre, .mono { font-family: ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; font-size: 12px; }
.charts { display: flex; flex-wrap: wrap; gap: 12px; }
svg.chart { background: var(--soft); border-radius: 6px; max-width: 100%; height: auto; }
svg .chart-title { font-size: 13px; font-weight: 600; fill: var(--fg); }
svg .tick, svg .legend { font-size: 11px; fill: var(--muted); } svg .axis-label { font-size: 11px; fill: var(--fg); }
svg .grid { stroke: #e3e6ec; } svg .axis { stroke: #9aa1ad; } svg .empty { fill: var(--muted); }
ol.lineage { list-style: none; padding: 0; margin: 0; border-left: 3px solid var(--line); }
ol.lineage > li { margin: 0 0 10px 0; padding: 6px 12px; position: relative; }
ol.lineage > li::before { content: ""; position: absolute; left: -8px; top: 12px; width: 13px; height: 13px;
   border-radius: 50%; background: var(--accent); }
ol.lineage > li.fix::before { background: #ff7f0e; } ol.lineage > li.failed::before { background: var(--bad); }
.step-head { font-weight: 600; } .kind { display: inline-block; padding: 0 6px; border-radius: 8px; font-size: 11px;
   background: var(--soft); border: 1px solid var(--line); margin-right: 6px; }
.plan { white-space: pre-wrap; background: var(--soft); border-left: 3px solid var(--accent); padding: 4px 8px;
   margin: 4px 0; overflow-wrap: anywhere; }
.md { white-space: normal; } .md p { margin: 2px 0; } .md ul, .md ol { margin: 2px 0; padding-left: 20px; }
.md pre { white-space: pre-wrap; overflow-wrap: anywhere; background: #fbfbfd; padding: 4px 6px; }
.md code { background: rgba(0,0,0,.05); padding: 0 3px; border-radius: 3px; }
.table-wrap { max-width: 100%; overflow-x: auto; }
.src { font-size: 11px; color: var(--muted); font-weight: normal; white-space: nowrap; }
pre.diff { background: #fbfbfd; border: 1px solid var(--line); padding: 6px 8px; overflow: auto; max-height: 520px;
   white-space: pre-wrap; overflow-wrap: anywhere; }
pre.diff .add { background: #e6ffec; color: #116329; display: block; }
pre.diff .del { background: #ffebe9; color: #82071e; display: block; }
pre.diff .hunk { color: #6f42c1; display: block; } pre.diff .file { color: var(--muted); display: block; }
pre.diff .ctx { display: block; }
pre.source { background: #fbfbfd; border: 1px solid var(--line); padding: 6px 8px; overflow: auto; max-height: 520px;
   white-space: pre-wrap; overflow-wrap: anywhere; }
ul.tree, ul.tree ul { list-style: none; padding-left: 18px; margin: 0; border-left: 1px dotted var(--line); }
ul.tree li { font-size: 12px; overflow-wrap: anywhere; }
ul.tree li.on-path > span.node { font-weight: 700; color: var(--accent); }
ul.tree span.st-failed { color: var(--bad); }
.badge { font-size: 11px; color: var(--muted); }
details > summary { cursor: pointer; color: var(--accent); }
.note { color: var(--muted); font-size: 12px; }
"""


def page(title: str, sections: Sequence[tuple[str, str, str]], events: int, now: float | None = None) -> str:
    """A whole static page: the title, when and from how many events it was made, a nav of
    its sections ((id, heading, html) each) and the sections."""
    generated = fmt.stamp(now if now is not None else time.time())
    nav = "".join(f'<a href="#{sid}">{esc(name)}</a>' for sid, name, _ in sections)
    body = "".join(
        f'<section id="{sid}"><h2>{esc(name)}</h2>{html}</section>' for sid, name, html in sections
    )
    return (
        f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f'<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{esc(title)}</title><style>{CSS}</style></head><body>"
        f'<h1>{esc(title)}</h1><p class="sub">generated {esc(generated)} from the event log'
        f" \u00b7 {events:,} events</p><nav>{nav}</nav>{body}</body></html>\n"
    )
